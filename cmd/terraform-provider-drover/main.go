// Command terraform-provider-drover is drover's Terraform provider (see
// terraform/provider). Terraform starts it; it is not run by hand.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/drover-sched/drover/terraform/provider"
	"github.com/drover-sched/drover/version"
)

func main() {
	debug := flag.Bool("debug", false, "run for a debugger (Terraform attaches through TF_REATTACH_PROVIDERS)")
	flag.Parse()
	if err := providerserver.Serve(context.Background(), provider.New(version.Get()), providerserver.ServeOpts{Address: provider.Address, Debug: *debug}); err != nil {
		log.Fatal(err)
	}
}
