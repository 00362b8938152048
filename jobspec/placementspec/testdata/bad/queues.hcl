queue "genomics" {
  preempt_after = "soon"
  guarantee {
    memory = "lots"
  }
  queue "bad name" {
  }
  queue "tier1" {
    min_runtime = "5 minutes"
    recommend {
      percentile = 95
    }
  }
  auto_apply {
    every      = "daily"
    max_change = 2
  }
}
