package main

import (
	"context"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/drover-sched/drover/api"
)

// runBPStorage: drover billing-project storage add | remove | list.
func (m adminCmds) runBPStorage(ctx context.Context, args []string) error {
	return m.sub(ctx, "billing-project storage", args, map[string]func(context.Context, []string) error{
		"add": m.runStorageAdd, "remove": m.runStorageRemove, "list": m.runStorageList,
	})
}

// readSecretFlag reads a credential from the file a flag names: secrets
// never go on a command line, where every process of the machine reads
// them.
func readSecretFlag(flag, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	return readSecretFile(path, "-"+flag)
}

func (m adminCmds) runStorageAdd(ctx context.Context, args []string) error {
	fs := m.newFlags("billing-project storage add", "PROJECT URL_PREFIX [-gcs-key-file F | -s3-access-key-id ID -s3-secret-access-key-file F] [-s3-endpoint URL -s3-region R -s3-path-style]")
	gcsKey := fs.String("gcs-key-file", "", "a service account's JSON key file: the project's gs:// objects are reached as that account (default: the workers' own credentials)")
	keyID := fs.String("s3-access-key-id", "", "the project's S3 access key ID (with -s3-secret-access-key-file)")
	secretFile := fs.String("s3-secret-access-key-file", "", "file holding the project's S3 secret access key")
	tokenFile := fs.String("s3-session-token-file", "", "file holding an S3 session token, for temporary keys")
	endpoint := fs.String("s3-endpoint", "", "an S3-compatible store's URL (default: AWS)")
	region := fs.String("s3-region", "", "the bucket's region (default: the workers' AWS_REGION; us-east-1 with keys)")
	pathStyle := fs.Bool("s3-path-style", false, "address the bucket as ENDPOINT/BUCKET/KEY, as most S3-compatible stores want")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	req := &api.AddStoragePrefixRequest{Prefix: pos[1]}
	c := &api.StorageCredentials{S3AccessKeyID: *keyID}
	if c.GCSServiceAccountKey, err = readSecretFlag("gcs-key-file", *gcsKey); err != nil {
		return err
	}
	if c.S3SecretAccessKey, err = readSecretFlag("s3-secret-access-key-file", *secretFile); err != nil {
		return err
	}
	if c.S3SessionToken, err = readSecretFlag("s3-session-token-file", *tokenFile); err != nil {
		return err
	}
	if *c != (api.StorageCredentials{}) {
		req.Credentials = c
	}
	if *endpoint != "" || *region != "" || *pathStyle {
		req.S3 = &api.S3Settings{Endpoint: *endpoint, Region: *region, PathStyle: *pathStyle}
	}
	if err := req.Validate(); err != nil {
		return usagef("%v", err)
	}
	list, err := m.Client().AddStoragePrefix(ctx, pos[0], req)
	if err != nil {
		return err
	}
	safef(m.Stdout, "Billing project %s: its jobs may read and write under %s (credentials: %s)\n", pos[0], prefixOf(req.Prefix), req.Credentials.Kind())
	return m.printPrefixes(list)
}

// prefixOf is a prefix as the servers keep it.
func prefixOf(raw string) string {
	p, err := api.CleanStoragePrefix(raw)
	if err != nil {
		return raw
	}
	return p
}

func (m adminCmds) runStorageRemove(ctx context.Context, args []string) error {
	fs := m.newFlags("billing-project storage remove", "PROJECT URL_PREFIX")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	list, err := m.Client().RemoveStoragePrefix(ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	safef(m.Stdout, "Billing project %s: removed %s; attempts that start from now on cannot use it\n", pos[0], prefixOf(pos[1]))
	return m.printPrefixes(list)
}

func (m adminCmds) runStorageList(ctx context.Context, args []string) error {
	fs := m.newFlags("billing-project storage list", "PROJECT [-json]")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	list, err := m.Client().ListStoragePrefixes(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(list)
	}
	return m.printPrefixes(list)
}

// printPrefixes prints storage prefixes as a table.
func (m adminCmds) printPrefixes(list []api.StoragePrefix) error {
	if len(list) == 0 {
		safeln(m.Stdout, "No storage prefixes: the project's jobs can name no input or output URL")
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 2, 2, ' ', 0)
	safef(tw, "PREFIX\tCREDENTIALS\tS3\tADDED BY\tADDED\n")
	for _, p := range list {
		s3 := "-"
		if p.S3 != nil {
			var parts []string
			if p.S3.Endpoint != "" {
				parts = append(parts, p.S3.Endpoint)
			}
			if p.S3.Region != "" {
				parts = append(parts, p.S3.Region)
			}
			if p.S3.PathStyle {
				parts = append(parts, "path-style")
			}
			s3 = strings.Join(parts, " ")
		}
		safef(tw, "%s\t%s\t%s\t%s\t%s\n", p.Prefix, p.Credentials, s3, p.AddedBy, ago(p.TimeAdded))
	}
	return tw.Flush()
}

// runBPSet changes settings of a billing project: an admin's
// (-allow-host-network) or its managers' (-max-priority).
func (m adminCmds) runBPSet(ctx context.Context, args []string) error {
	fs := m.newFlags("billing-project set", "PROJECT [-allow-host-network=true|false] [-max-priority N]")
	host := fs.String("allow-host-network", "", "true: the project's members may run jobs on network \"host\" (the machine's own, with its loopback services and the cloud metadata address); false: only admins may (an admin's setting)")
	maxPrio := fs.String("max-priority", "", "the highest priority the project's batches may ask, 0 (the default) to 1000000; its queue's max_priority still holds (a manager's setting)")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *maxPrio != "" {
		v, err := strconv.ParseInt(*maxPrio, 10, 64)
		if err != nil {
			return usagef("-max-priority is %q; it is a whole number from 0 to 1000000", *maxPrio)
		}
		p, err := m.Client().SetMaxPriority(ctx, pos[0], v)
		if err != nil {
			return err
		}
		safef(m.Stdout, "Billing project %s: max priority %d (its queue's max_priority holds too)\n", p.Name, p.MaxPriority)
		if *host == "" {
			return nil
		}
	}
	var req api.BillingProjectSettings
	if *host != "" {
		v, err := strconv.ParseBool(*host)
		if err != nil {
			return usagef("-allow-host-network is %q; it is true or false", *host)
		}
		req.AllowHostNetwork = &v
	}
	if req == (api.BillingProjectSettings{}) {
		return usagef("drover billing-project set needs a setting: -allow-host-network=true|false or -max-priority N")
	}
	p, err := m.Client().SetBillingProjectSettings(ctx, pos[0], &req)
	if err != nil {
		return err
	}
	safef(m.Stdout, "Billing project %s: host network %s\n", p.Name, hostNetworkWord(p.AllowHostNetwork))
	return nil
}

func hostNetworkWord(allowed bool) string {
	if allowed {
		return "allowed to its members"
	}
	return "for admins only"
}
