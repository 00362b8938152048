# Tiers, as Pinterest's Monarch shapes them: tier 1 (the billing project
# prod's nightly pipeline) preempts tier 3 (everything in default) when it
# has waited 5 s below half its fair share. The recommendation covers 95%
# of the time tier 1 is in use and 80% of tier 3's; drover queue
# auto-apply demo regenerates the tree's settings from recorded use, a
# quarter at most a step (make demo runs it as a dry run).
queue "demo" {
  recommend {
    percentile = 0.80
  }
  auto_apply {
    every      = "24h"
    max_change = 0.25
    dry_run    = true
  }

  queue "tier1" {
    weight                = 4
    billing_projects      = ["prod"]
    preempt_after         = "5s"
    allow_preemption_from = ["demo/tier3"]
    recommend {
      percentile = 0.95
    }
  }
  queue "tier3" {
    weight           = 1
    billing_projects = ["default"]
    preemptible      = true
  }
}
