package server

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/drover-sched/drover/internal/secrets"
)

// secretsKeyFile is where a server that is alone keeps the key sealing
// storage credentials when it is given none (-secrets-key-file).
const secretsKeyFile = "secrets.key"

// alone reports whether the server is a cluster of one: the dev agent's,
// or `drover server -bootstrap-expect 1` that joins nobody.
func (c *Config) alone() bool {
	return c.Bootstrap || (c.BootstrapExpect == 1 && len(c.Join) == 0 && c.ConsulAddr == "")
}

// loadSecrets reads the keyring that seals billing projects' storage
// credentials: SecretsKeyFile, or for a server that is alone
// <DataDir>/secrets.key, made at its first start. A server of several
// without SecretsKeyFile keeps no credentials (nil): each server would
// make another key, and a leader could not open what another sealed.
func loadSecrets(cfg *Config, log *slog.Logger) (*secrets.Keyring, error) {
	if cfg.SecretsKeyFile != "" {
		k, err := secrets.ReadKeyFile(cfg.SecretsKeyFile)
		if err != nil {
			return nil, err
		}
		log.Info("storage credentials are sealed with the secrets key file", "file", cfg.SecretsKeyFile, "key", k.KeyIDs()[0])
		return k, nil
	}
	if !cfg.alone() {
		log.Info("no -secrets-key-file: storage prefixes with credentials of their own are refused (workers use their own identity)")
		return nil, nil
	}
	path := filepath.Join(cfg.DataDir, secretsKeyFile)
	k, created, err := secrets.EnsureKeyFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if created {
		log.Info("made a secrets key for storage credentials; a server that joins this one later needs the same file (-secrets-key-file)", "file", path, "key", k.KeyIDs()[0])
	}
	return k, nil
}
