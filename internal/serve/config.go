package serve

import (
	"errors"
	"fmt"
	"maps"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailhook/mailhook/internal/config"
	"github.com/mailhook/mailhook/internal/erasure"
	"github.com/mailhook/mailhook/internal/provider"
	"github.com/mailhook/mailhook/internal/providercounts"
	"github.com/mailhook/mailhook/internal/signature"
)

// The config is plain data (internal/config imports nothing that builds anything); this file is
// where it meets the packages it configures: it checks, at load, what only they can judge, and
// converts the config's types into the options each of them takes.

// LoadConfig loads the file at path (empty: no file) as config.Load does, and checks it as a
// process is built from it (CheckConfig): every command that reads the config loads it here, so
// a bad config stops it with one line naming the key before anything runs.
func LoadConfig(path string) (config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return config.Config{}, err
	}
	if err := CheckConfig(cfg); err != nil {
		return config.Config{}, err
	}
	return cfg, nil
}

// CheckConfig validates cfg (config.Validate), then what the config cannot judge by itself:
// that the database URLs parse as pgx parses them, that each endpoint's adapter accepts its settings, its reconcile block suits its provider,
// no two providers' events share a namespace, each sink secret decodes as the notifications are
// signed with it, and the erasure key is one erasure can hash with. Errors name the key, as
// config's do, and never quote a secret.
func CheckConfig(cfg config.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	for _, u := range []struct{ key, url string }{{"database.url", cfg.Database.URL}, {"database.listen_url", cfg.Database.ListenURL}} {
		if err := checkConnString(u.url); err != nil {
			return fmt.Errorf("config: %s %w", u.key, err)
		}
	}
	if err := checkEndpoints(cfg.Endpoints); err != nil {
		return err
	}
	for i, s := range cfg.Sinks {
		if err := checkSinkSecret(fmt.Sprintf("sinks[%d]", i), s); err != nil {
			return err
		}
	}
	_, err := ErasureHasher(cfg.Erasure)
	return err
}

// checkConnString refuses what pgx cannot parse as a connection string. Neither pgx's error nor
// net/url's can be shown: both may quote the string, password and all, when it is malformed.
func checkConnString(s string) error {
	if s == "" {
		return nil
	}
	if _, err := pgconn.ParseConfig(s); err != nil {
		return errors.New("is not a PostgreSQL URL or key=value string (a password holding @, :, / or # must be percent-encoded)")
	}
	return nil
}

// checkEndpoints builds each endpoint's adapter and counts settings as the process will, and
// checks the endpoints' event namespaces.
func checkEndpoints(endpoints []config.Endpoint) error {
	// Events, messages, dedupe and signature nonces are keyed by event namespace
	// (provider.EventNamespace), so a namespace must belong to one provider. Each registered
	// provider owns its own name even with no endpoint configured: an endpoint of it added later
	// would find a generic endpoint's rows under that name. Several endpoints of one fixed provider
	// (two Mailgun accounts) share its namespace on purpose, as they always have.
	type owner struct {
		provider string
		endpoint int // -1: the registered provider itself
	}
	namespaces := map[string]owner{}
	reconciled := map[string]string{} // namespace → the endpoint comparing its counts
	for _, n := range provider.Names() {
		namespaces[n] = owner{provider: n, endpoint: -1}
	}
	for i, e := range endpoints {
		key := fmt.Sprintf("endpoints[%d]", i)
		if len(e.Secrets) == 0 && provider.NeedsSecrets(e.Provider) {
			return fmt.Errorf("config: %s.secrets (endpoint %q) is empty: at least one signing secret is required", key, e.Name)
		}
		if _, err := provider.New(e.Provider, ProviderSettings(e)); err != nil {
			return fmt.Errorf("config: %s.provider (endpoint %q): %w", key, e.Name, err)
		}
		ns := provider.EventNamespace(e.Provider, e.Name)
		if e.Reconcile != nil {
			if err := CountsSettings(*e.Reconcile).Validate(e.Provider); err != nil {
				return fmt.Errorf("config: %s (endpoint %q): %w", key, e.Name, err)
			}
			// The received side of the comparison is counted per namespace: two endpoints
			// sharing one would each be compared with both accounts' events.
			if other, ok := reconciled[ns]; ok {
				return fmt.Errorf("config: %s.reconcile (endpoint %q): endpoint %q, under the same namespace %q, has a reconcile block too; "+
					"their received events cannot be told apart, so only one of them may compare counts", key, e.Name, other, ns)
			}
			reconciled[ns] = e.Name
		}
		switch o, taken := namespaces[ns]; {
		case taken && o.provider != e.Provider && o.endpoint < 0:
			return fmt.Errorf("config: %s.name (endpoint %q) is the name of provider %q: %s endpoints key their events and messages by endpoint name, "+
				"so this one's would share the namespace %q with provider %q's (event dedupe, messages, daily counts); rename the endpoint",
				key, e.Name, o.provider, e.Provider, ns, o.provider)
		case taken && o.provider != e.Provider:
			return fmt.Errorf("config: %s.name (endpoint %q): its events are keyed under %q, as are those of endpoints[%d] (provider %q); rename one",
				key, e.Name, ns, o.endpoint, o.provider)
		case !taken:
			namespaces[ns] = owner{provider: e.Provider, endpoint: i}
		}
	}
	return nil
}

// MinSinkSecretBytes is the least a sink secret may decode to (Standard Webhooks: 24 to 64).
const MinSinkSecretBytes = 24

// checkSinkSecret checks a set secret (an http sink's always is: config.Validate).
func checkSinkSecret(key string, s config.Sink) error {
	if s.Secret == "" {
		return nil
	}
	// Notifications are signed with signature.Standard, which decodes the secret this way;
	// one it cannot decode would fail every delivery until notify.give_up_after.
	// NewStandard's errors never quote the secret.
	scheme, err := signature.NewStandard(s.Secret, 0)
	if err != nil {
		return fmt.Errorf("config: %s.secret (sink %q) does not decode: %w (want whsec_<base64>, as Standard Webhooks)", key, s.Name, err)
	}
	// Standard Webhooks asks for 24 to 64 random bytes: a short key can be guessed from one
	// signed notification, and then anyone can sign notifications the sink trusts.
	if n := scheme.KeyLength(); n < MinSinkSecretBytes {
		return fmt.Errorf("config: %s.secret (sink %q) decodes to %d bytes, want at least %d (make one with: echo whsec_$(head -c 32 /dev/urandom | base64))", key, s.Name, n, MinSinkSecretBytes)
	}
	return nil
}

// ErasureHasher is erasure.hash_key's hasher: the zero Hasher (erasure not configured, and
// refused) when the key is unset.
func ErasureHasher(e config.Erasure) (erasure.Hasher, error) {
	if e.HashKey == "" {
		return erasure.Hasher{}, nil
	}
	key, err := erasure.ParseKey(e.HashKey)
	if err != nil {
		return erasure.Hasher{}, fmt.Errorf("config: erasure.hash_key: %w", err)
	}
	return erasure.NewHasher(key)
}

// ProviderSettings are the endpoint's settings as its adapter takes them (without the
// HTTPClient, which is the process's).
func ProviderSettings(e config.Endpoint) provider.Settings {
	p := e.ProviderSettings
	s := provider.Settings{Secrets: p.Secrets, Tolerance: p.Tolerance, AllowCIDRs: p.AllowCIDRs, TopicARNs: p.TopicARNs,
		CertHostPattern: p.CertHostPattern}
	if p.Generic != nil {
		// The same fields in the same order: a field added to one and not the other stops
		// this conversion from compiling.
		g := provider.Generic(*p.Generic)
		g.StatusMap = maps.Clone(g.StatusMap)
		s.Generic = &g
	}
	return s
}

// CountsSettings is an endpoint's reconcile block as providercounts and backfill take it.
func CountsSettings(r config.Reconcile) providercounts.Settings {
	s := providercounts.Settings{BaseURL: r.BaseURL, APIKey: r.APIKey, ServerToken: r.ServerToken, MessageStream: r.MessageStream,
		Domain: r.Domain, Region: r.Region, Backfill: r.Backfill, Rate: r.Rate, Timeout: r.Timeout}
	if r.Tolerance != nil {
		s.Tolerance = make(map[string]providercounts.Tolerance, len(r.Tolerance))
		for k, t := range r.Tolerance {
			s.Tolerance[k] = providercounts.Tolerance{Absolute: t.Absolute, Fraction: t.Fraction}
		}
	}
	return s
}
