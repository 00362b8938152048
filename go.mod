module github.com/drover-sched/drover

go 1.26

require (
	github.com/google/btree v1.1.3
	github.com/hashicorp/go-msgpack/v2 v2.1.5
	github.com/hashicorp/hcl/v2 v2.24.0
	github.com/zclconf/go-cty v1.16.3
)

require (
	github.com/agext/levenshtein v1.2.1 // indirect
	github.com/apparentlymart/go-textseg/v15 v15.0.0 // indirect
	github.com/mitchellh/go-wordwrap v1.0.1 // indirect
	golang.org/x/mod v0.28.0 // indirect
	golang.org/x/sync v0.17.0 // indirect
	golang.org/x/text v0.25.0 // indirect
	golang.org/x/tools v0.37.0 // indirect
)
