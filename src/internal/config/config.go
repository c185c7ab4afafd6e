// Package config reads the sidecar's settings from command-line flags and
// COLLAPSER_* environment variables. Every flag has a variable named after
// it (--cache-ttl is COLLAPSER_CACHE_TTL); a flag given on the command line
// wins over its variable. A value that does not parse or is out of range is
// an error that names the flag or variable it came from.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/collapser/collapser/src/internal/admin"
	"github.com/collapser/collapser/src/internal/collapse"
	"github.com/collapser/collapser/src/internal/command"
	"github.com/collapser/collapser/src/internal/envflag"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/policy"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/replay"
	"github.com/collapser/collapser/src/internal/requestkey"
	"github.com/collapser/collapser/src/internal/serverlimits"
)

// EnvPrefix starts the name of every environment variable the sidecar reads.
const EnvPrefix = "COLLAPSER_"

// Settings are the sidecar's settings: flags over environment variables over defaults.
type Settings struct {
	Listen        string // gRPC address callers use
	Backend       string // the backend's gRPC address
	MetricsListen string // address of the Prometheus /metrics endpoint
	// TLSCertFile and TLSKeyFile are the callers' listener's certificate;
	// "": plain text. TLSClientCAFile, when set, signs the certificates
	// every caller must present.
	TLSCertFile, TLSKeyFile, TLSClientCAFile string
	// BackendTLS calls the backend over TLS, verified against
	// BackendTLSCAFile ("": the system's roots) for BackendTLSServerName
	// ("": the backend's host), presenting BackendTLSCertFile and
	// BackendTLSKeyFile when set.
	BackendTLS                                                                    bool
	BackendTLSCAFile, BackendTLSServerName, BackendTLSCertFile, BackendTLSKeyFile string
	Peers                                                                         string // gRPC target of the other replicas; "" for none
	// Replicas names every replica, ready or not, which purges are taken
	// to and synced with; "": Peers.
	Replicas   string
	PeerListen string // address of the listener for peers' calls
	// PeerTokenFile holds the release's peer token, which every call one
	// replica makes to another carries.
	PeerTokenFile string
	// PeerTLS names the certificate, key and CA of the mutual TLS between
	// replicas; all "" with peers: PeerPlaintext must be set.
	PeerTLSCertFile, PeerTLSKeyFile, PeerTLSCAFile string
	// PeerPlaintext lets replicas call each other in plain text; false:
	// peers need the PeerTLS files (CheckPeerTransport).
	PeerPlaintext bool

	AdminListen string // address of the admin service's listener; "" for none
	// AdminAllowRemote lets callers from other addresses than loopback purge.
	AdminAllowRemote bool
	// AdminTokenFile holds the token every admin call must carry; "": none.
	AdminTokenFile string
	PolicyFile     string // path of the per-method policy file; "" for none
	// Policy is the default rule, which a policy file's default inherits
	// (--default-collapse, --cache-ttl, --stale-while-revalidate,
	// --stale-if-error, --max-ttl, --cache-control, --backend-timeout), and
	// the methods collapsed as unary (--collapse-methods).
	Policy policy.Defaults
	// Proxy is what the proxy keeps (--cache-max-*, --stream-max-*), calls
	// (--max-backend-calls), reads and sends (--receive-timeout,
	// --max-recv-msg-bytes, --max-send-msg-bytes), and how it treats
	// answers (--private-headers, --tags-header, --forward-tags-header,
	// --cache-status).
	Proxy proxy.Settings
	// Server bounds what callers can make the server hold
	// (--max-connections, --max-concurrent-streams, --max-header-bytes).
	Server serverlimits.Limits
	// Key says which request headers are in a call's key (--key-headers,
	// --ignore-headers, --unsafe-share-across-credentials).
	Key             requestkey.RuleOptions
	DescriptorSet   string // path of a FileDescriptorSet
	Reflection      bool   // learn method kinds from the backend
	ShutdownTimeout time.Duration
	// MemoryLimit is the container's memory limit in bytes; 0: none known.
	MemoryLimit int64
	LogLevel    slog.Level
	LogFormat   string // "json" or "text"
}

// Default returns the settings used when nothing is configured. Each value
// is the named default of the package that owns the setting.
func Default() Settings {
	return Settings{
		Listen:        ":50052",
		Backend:       "localhost:50051",
		MetricsListen: ":2112",
		PeerListen:    peers.DefaultListen,
		AdminListen:   admin.DefaultListen,
		Policy: policy.Defaults{
			Collapse:              policy.Auto,
			CacheTTL:              policy.DefaultCacheTTL,
			MaxTTL:                policy.DefaultMaxTTL,
			Timeout:               policy.DefaultTimeout,
			TTLJitter:             policy.DefaultTTLJitter,
			EarlyRefresh:          true,
			CollapseMethodsSource: EnvName("collapse-methods"),
		},
		Proxy: proxy.Settings{
			Cache: collapse.Limits{
				MaxEntries:    collapse.DefaultMaxEntries,
				MaxBytes:      collapse.DefaultMaxBytes,
				MaxEntryBytes: collapse.DefaultMaxEntryBytes,
			},
			Streams: replay.Limits{
				MaxBytes:     replay.DefaultMaxBytes,
				MaxMessages:  replay.DefaultMaxMessages,
				MaxHeldBytes: replay.DefaultMaxHeldBytes,
			},
			MaxBackendCalls: proxy.DefaultMaxBackendCalls,
			SoftPurgeRate:   proxy.DefaultSoftPurgeRate,
			ReceiveTimeout:  proxy.DefaultReceiveTimeout,
			MaxRecvMsgBytes: proxy.DefaultMaxMsgBytes,
			MaxSendMsgBytes: proxy.DefaultMaxMsgBytes,
			TagsHeader:      proxy.DefaultTagsHeader,
		},
		Server: serverlimits.Limits{
			MaxConnections:       serverlimits.DefaultMaxConnections,
			MaxConcurrentStreams: serverlimits.DefaultMaxConcurrentStreams,
			MaxHeaderBytes:       serverlimits.DefaultMaxHeaderBytes,
		},
		Reflection:      true,
		ShutdownTimeout: 15 * time.Second,
		LogLevel:        slog.LevelWarn,
		LogFormat:       command.LogJSON,
	}
}

// Parse returns the settings given by args (without the program name) over
// the environment read through lookup, over the defaults. Usage goes to out,
// for -h (the error is then flag.ErrHelp) and after a bad flag.
func Parse(args []string, lookup envflag.Lookup, out io.Writer) (Settings, error) {
	c := Default()
	fs := flagSet(&c)
	for former, now := range renamed {
		fs.Func(former, "renamed --"+now, func(string) error {
			return fmt.Errorf("renamed: use --%s (%s)", now, EnvName(now))
		})
	}
	if err := envflag.Apply(fs, EnvPrefix, lookup); err != nil {
		return Settings{}, err
	}
	if err := command.ParseFlags(fs, args, out, out); err != nil {
		return Settings{}, err
	}
	return c, c.validate()
}

// renamed maps the former name of a flag to its name now. A former name,
// as a flag or a variable, is refused with an error naming the new one
// rather than ignored.
var renamed = map[string]string{
	"stream-cache-max-bytes": "stream-max-held-bytes",
	"unary-methods":          "collapse-methods",
}

// flagSet returns the sidecar's flags, each setting its field of c and
// taking c's value as its default.
func flagSet(c *Settings) *flag.FlagSet {
	fs := flag.NewFlagSet("collapser", flag.ContinueOnError)
	fs.Usage = envflag.Usage(fs, EnvPrefix, "cache-ttl")
	fs.StringVar(&c.Listen, "listen", c.Listen, "gRPC `address` callers connect to")
	fs.StringVar(&c.Backend, "backend", c.Backend, "the backend's gRPC `address`")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "`path` of the callers' listener's certificate (PEM), with --tls-key-file, read again when it changes; empty: plain text")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", "", "`path` of the key of --tls-cert-file, in its directory")
	fs.StringVar(&c.TLSClientCAFile, "tls-client-ca-file", "", "`path` of the CA certificates (PEM) that sign the certificates every caller must present (mutual TLS): a caller's certificate is a credential in its key, so two callers' certificates never share an answer; empty: none asked")
	fs.BoolVar(&c.BackendTLS, "backend-tls", false, "call the backend over TLS")
	fs.StringVar(&c.BackendTLSCAFile, "backend-tls-ca-file", "", "`path` of the CA certificates (PEM) that verify the backend's, with --backend-tls; empty: the system's roots")
	fs.StringVar(&c.BackendTLSServerName, "backend-tls-server-name", "", "`name` the backend's certificate is verified for, with --backend-tls; empty: the host of --backend")
	fs.StringVar(&c.BackendTLSCertFile, "backend-tls-cert-file", "", "`path` of the certificate (PEM) the sidecar presents to a backend that asks for one, with --backend-tls-key-file")
	fs.StringVar(&c.BackendTLSKeyFile, "backend-tls-key-file", "", "`path` of the key of --backend-tls-cert-file, in its directory")
	fs.StringVar(&c.MetricsListen, "metrics-listen", c.MetricsListen, "`address` of the Prometheus /metrics endpoint")
	fs.StringVar(&c.Peers, "peers", "", "gRPC `target` of every replica, this one included (dns:///name:port, or host:port,host:port): each key's calls are made by its owner; empty: no peers")
	fs.StringVar(&c.Replicas, "replicas", "", "gRPC `target` naming every replica, ready or not, this one included (dns:///name:port of a headless Service that publishes not-ready addresses, or host:port,host:port), with --peers and --peer-token-file: purges are taken to each and each fetches those it missed; empty: --peers")
	fs.StringVar(&c.PeerListen, "peer-listen", c.PeerListen, "`address` peers forward calls to, with --peers")
	fs.StringVar(&c.PeerTokenFile, "peer-token-file", "", "`path` of the file holding the release's peer token (at least 32 bytes, read again when it changes; the one before a change is still accepted), required with --peers: every call between replicas carries it, and the peer listener takes none without it")
	fs.StringVar(&c.PeerTLSCertFile, "peer-tls-cert-file", "", "`path` of this replica's certificate (PEM) for mutual TLS between replicas, with --peer-tls-key-file and --peer-tls-ca-file, read again when it changes: replicas accept only a certificate the CA signed that carries their own identity (first URI SAN, else first DNS SAN); required with --peers unless --peer-plaintext")
	fs.StringVar(&c.PeerTLSKeyFile, "peer-tls-key-file", "", "`path` of the key of --peer-tls-cert-file, in its directory")
	fs.StringVar(&c.PeerTLSCAFile, "peer-tls-ca-file", "", "`path` of the CA certificates (PEM) that sign the replicas' certificates")
	fs.BoolVar(&c.PeerPlaintext, "peer-plaintext", false, "let replicas call each other in plain text, with --peers: the peer token still guards every call, but tokens, callers' headers and answers cross the network readable; false: with --peers, start is refused unless --peer-tls-cert-file, --peer-tls-key-file and --peer-tls-ca-file are set")
	fs.StringVar(&c.AdminListen, "admin-listen", c.AdminListen, "`address` of the admin service (collapser.admin.v1: purges): host:port, loopback by default so that only the pod's own containers reach it, or unix:<path> of a socket, made 0666 so that whoever reaches its directory (a volume of the pod's containers) may connect; empty: none")
	fs.BoolVar(&c.AdminAllowRemote, "admin-allow-remote", false, "let callers from other addresses than loopback purge through the admin service (needs --admin-token-file)")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", "", "`path` of a token (at least 32 bytes, read again when it changes) every admin call must carry as authorization: Bearer <token>, from any address; needed for an admin listener off loopback; empty: loopback or a Unix socket only")
	fs.StringVar(&c.Proxy.TagsHeader, "tags-header", c.Proxy.TagsHeader, "response `header` an answer names its tags in (space or comma separated), by which the admin service purges; empty: none")
	fs.BoolVar(&c.Proxy.ForwardTagsHeader, "forward-tags-header", false, "pass the tags header on to callers instead of taking it out of the answer")
	fs.Var(notValue{&c.Proxy.OmitCacheStatus}, "cache-status", "add the sidecar's RFC 9211 cache-status entry (how it served the call: hit, ttl, collapsed, stored, fwd, detail) to every answer, after the backend's entries")
	fs.StringVar(&c.PolicyFile, "policy-file", "", "`path` of the per-method policy file (YAML), reloaded when it changes; its default rule overrides the flags below")
	fs.Var(collapseValue{&c.Policy.Collapse}, "default-collapse", "which unary methods the default rule collapses: auto (by idempotency_level), all or none")
	fs.DurationVar(&c.Policy.CacheTTL, "cache-ttl", c.Policy.CacheTTL, "`duration` a successful response is served from cache; 0: share calls in flight only")
	fs.DurationVar(&c.Policy.StaleWhileRevalidate, "stale-while-revalidate", 0, "`duration` after the TTL a response is served at once while one background call refreshes it")
	fs.DurationVar(&c.Policy.StaleIfError, "stale-if-error", 0, "`duration` after the TTL a response answers callers whose call failed with UNAVAILABLE or DEADLINE_EXCEEDED")
	fs.Float64Var(&c.Policy.TTLJitter, "ttl-jitter", c.Policy.TTLJitter, "most `fraction` of a response's TTL (the policy's or one it declares) it is shortened by, drawn from its key, so that keys loaded together do not expire together; 0: none")
	fs.BoolVar(&c.Policy.EarlyRefresh, "early-refresh", c.Policy.EarlyRefresh, "refresh a response that is still read before its TTL ends, at a time drawn from its key, spreading the refreshes of keys loaded together over their TTL; its readers are served it meanwhile")
	fs.DurationVar(&c.Policy.MaxTTL, "max-ttl", c.Policy.MaxTTL, "`duration` bounding each window an answer's cache-control declares (max-age, s-maxage, stale-while-revalidate, stale-if-error)")
	fs.Var(cacheControlValue{&c.Policy.IgnoreCacheControl}, "cache-control", "whether an answer's cache-control sets how long it is served (bounded by --max-ttl): honor or ignore")
	fs.IntVar(&c.Proxy.Cache.MaxEntries, "cache-max-entries", c.Proxy.Cache.MaxEntries, "most `responses` held in the cache")
	fs.Int64Var(&c.Proxy.Cache.MaxBytes, "cache-max-bytes", c.Proxy.Cache.MaxBytes, "most `bytes` held in the cache, counting what the Go heap holds for each entry: its key (request payload and headers), its response with metadata, and its overhead")
	fs.Int64Var(&c.Proxy.Cache.MaxEntryBytes, "cache-max-entry-bytes", c.Proxy.Cache.MaxEntryBytes, "`bytes`: larger entries (key and response) are shared with waiting callers but not cached")
	fs.Int64Var(&c.Proxy.Streams.MaxBytes, "stream-max-bytes", c.Proxy.Streams.MaxBytes, "most `bytes` the messages of one replayed stream's record hold (as allocated); past it no caller joins and the stream is not kept")
	fs.IntVar(&c.Proxy.Streams.MaxMessages, "stream-max-messages", c.Proxy.Streams.MaxMessages, "most `messages` the record of one replayed stream holds; past it no caller joins and the stream is not kept")
	fs.Int64Var(&c.Proxy.Streams.MaxHeldBytes, "stream-max-held-bytes", c.Proxy.Streams.MaxHeldBytes, "most `bytes` of ended replayed streams kept to be replayed whole, counting what the Go heap holds for each: its key, metadata, messages and overhead")
	fs.DurationVar(&c.Policy.Timeout, "backend-timeout", c.Policy.Timeout, "`duration` bound of each shared backend call, its wait for a slot included, whatever its callers' deadlines")
	fs.Float64Var(&c.Proxy.SoftPurgeRate, "soft-purge-rate", c.Proxy.SoftPurgeRate, "most `refreshes` per second of the answers one soft purge of a method or tag takes back: each is served stale until its turn, so that the purge does not send all their callers to the backend at once; hard purges and purges of one request are never paced; 0: all at once")
	fs.IntVar(&c.Proxy.MaxBackendCalls, "max-backend-calls", c.Proxy.MaxBackendCalls, "most shared backend `calls` running at once; more wait within their callers' deadlines, then fail with RESOURCE_EXHAUSTED")
	fs.DurationVar(&c.Proxy.ReceiveTimeout, "receive-timeout", c.Proxy.ReceiveTimeout, "`duration` a collapsed call may take to deliver its request message")
	fs.IntVar(&c.Proxy.MaxRecvMsgBytes, "max-recv-msg-bytes", c.Proxy.MaxRecvMsgBytes, "largest request (and backend response) accepted, in `bytes`; larger ones fail with RESOURCE_EXHAUSTED")
	fs.IntVar(&c.Proxy.MaxSendMsgBytes, "max-send-msg-bytes", c.Proxy.MaxSendMsgBytes, "largest message sent, in `bytes`; larger ones fail with RESOURCE_EXHAUSTED")
	fs.IntVar(&c.Server.MaxConnections, "max-connections", c.Server.MaxConnections, "most caller `connections` served at once; more wait to be accepted")
	fs.Var(uint32Value{&c.Server.MaxConcurrentStreams}, "max-concurrent-streams", "most `calls` open at once on one connection")
	fs.Var(uint32Value{&c.Server.MaxHeaderBytes}, "max-header-bytes", "largest request header list (method name and metadata) accepted, in `bytes`")
	fs.Var(listValue{&c.Key.KeyHeaders}, "key-headers", "comma-separated `headers` that make up the key (credentials and :authority are always added); empty: every header but the ignored ones")
	fs.Var(listValue{&c.Key.IgnoreHeaders}, "ignore-headers", "comma-separated `headers` left out of the key, in addition to the built-in transport and tracing headers")
	fs.Var(listValue{&c.Proxy.PrivateHeaders}, "private-headers", "comma-separated response `headers` that make a response private (sent only to its own caller, never cached), besides set-cookie")
	fs.BoolVar(&c.Key.ShareAcrossCredentials, "unsafe-share-across-credentials", false, "UNSAFE: leave authorization, cookie and other credentials out of the key, so callers with different credentials share responses")
	fs.Var(listValue{&c.Policy.CollapseMethods}, "collapse-methods", "comma-separated `methods` (/pkg.Service/Method) to treat as unary and collapse, whatever their idempotency_level")
	fs.StringVar(&c.DescriptorSet, "descriptor-set", "", "`path` of a FileDescriptorSet (protoc --descriptor_set_out) naming the backend's methods")
	fs.BoolVar(&c.Reflection, "reflection", c.Reflection, "learn method kinds from the backend's server reflection")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "`duration` calls in flight may take to finish after SIGTERM")
	fs.Int64Var(&c.MemoryLimit, "memory-limit", 0, "the container's memory limit in `bytes` (the chart passes it): the Go runtime's soft memory limit is 90% of it unless GOMEMLIMIT is set; 0: none")
	command.LogFlags(fs, &c.LogLevel, &c.LogFormat)

	bound(fs, 0, math.Inf(1), "must not be negative", "cache-ttl", "stale-while-revalidate", "stale-if-error", "shutdown-timeout", "memory-limit")
	bound(fs, 1, math.Inf(1), "must be positive",
		"cache-max-entries", "cache-max-bytes", "cache-max-entry-bytes",
		"stream-max-bytes", "stream-max-messages", "stream-max-held-bytes",
		"backend-timeout", "max-backend-calls", "receive-timeout", "max-ttl",
		"max-recv-msg-bytes", "max-send-msg-bytes", "max-connections")
	bound(fs, 1, math.MaxUint32, "must be in [1, 4294967295]", "max-concurrent-streams")
	bound(fs, 0, math.Nextafter(1, 0), "must be at least 0 and under 1", "ttl-jitter")
	bound(fs, 0, math.Inf(1), "must not be negative", "soft-purge-rate")
	bound(fs, 1024, math.MaxUint32, "must be in [1024, 4294967295]", "max-header-bytes")
	return fs
}

// bound makes each named flag of fs refuse a value its type parses but that
// lies outside [lo, hi]: the value must meet, in those words. The range is
// checked where a value is read, so the flag package and envflag name the
// flag or variable that gave it.
func bound(fs *flag.FlagSet, lo, hi float64, must string, names ...string) {
	for _, name := range names {
		f := fs.Lookup(name)
		f.Value = &bounded{Getter: f.Value.(flag.Getter), lo: lo, hi: hi, must: must}
	}
}

// bounded is a numeric flag (int, int64, uint, uint32, float64 or time.Duration)
// whose value must lie in [lo, hi].
type bounded struct {
	flag.Getter
	lo, hi float64
	must   string
}

func (b *bounded) Set(s string) error {
	if err := b.Getter.Set(s); errors.Is(err, strconv.ErrRange) {
		return errors.New(b.must) // past what its type holds, so past [lo, hi] too
	} else if err != nil {
		return err
	}
	var v float64
	switch n := b.Get().(type) {
	case int:
		v = float64(n)
	case int64:
		v = float64(n)
	case uint:
		v = float64(n)
	case uint32:
		v = float64(n)
	case time.Duration:
		v = float64(n)
	case float64:
		v = n
	default:
		return fmt.Errorf("config: a bound on a %T flag", n)
	}
	if v < b.lo || v > b.hi {
		return errors.New(b.must)
	}
	return nil
}

// String returns the value, or "" for the zero bounded the flag package
// makes to tell whether a default is its type's zero.
func (b *bounded) String() string {
	if b == nil || b.Getter == nil {
		return ""
	}
	return b.Getter.String()
}

// EnvName returns the environment variable read for a flag.
func EnvName(flagName string) string {
	return envflag.Name(EnvPrefix, flagName)
}

// validate checks what no single flag can: addresses, the log format, the
// peers' transport (CheckPeerTransport), and the memory limit against the
// caches. Each flag checks its own range (bound).
func (c Settings) validate() error {
	var errs []error
	check := func(ok bool, flagName, format string, args ...any) {
		if !ok {
			errs = append(errs, settingError(flagName, format, args...))
		}
	}
	addrs := []struct{ flag, addr string }{{"listen", c.Listen}, {"backend", c.Backend}, {"metrics-listen", c.MetricsListen}, {"peer-listen", c.PeerListen}}
	if socket, ok := strings.CutPrefix(c.AdminListen, "unix:"); ok {
		check(socket != "", "admin-listen", "unix: names no socket file")
	} else if c.AdminListen != "" {
		addrs = append(addrs, struct{ flag, addr string }{"admin-listen", c.AdminListen})
		host, _, _ := net.SplitHostPort(c.AdminListen)
		check(c.AdminTokenFile != "" || loopbackHost(host), "admin-token-file",
			"the admin listener %s is not on loopback: it needs a token every call carries, or anyone who reaches the pod could purge", c.AdminListen)
	}
	check(!c.AdminAllowRemote || c.AdminTokenFile != "", "admin-token-file",
		"--admin-allow-remote lets other addresses purge: they must carry a token")
	for _, a := range addrs {
		_, _, err := net.SplitHostPort(a.addr)
		check(err == nil, a.flag, "%q is not host:port", a.addr)
	}
	check(c.Peers == "" || c.PeerTokenFile != "", "peer-token-file",
		"peers (--peers) need the release's peer token: every call between replicas must prove it comes from one")
	errs = append(errs, c.CheckPeerTransport())
	check((c.TLSCertFile == "") == (c.TLSKeyFile == ""), "tls-cert-file", "the callers' listener needs both --tls-cert-file and --tls-key-file")
	check(c.TLSClientCAFile == "" || c.TLSCertFile != "", "tls-client-ca-file", "asks callers for certificates over TLS: set --tls-cert-file and --tls-key-file")
	check((c.BackendTLSCertFile == "") == (c.BackendTLSKeyFile == ""), "backend-tls-cert-file", "a certificate for the backend needs both --backend-tls-cert-file and --backend-tls-key-file")
	backendTLS := []string{c.BackendTLSCAFile, c.BackendTLSServerName, c.BackendTLSCertFile}
	check(c.BackendTLS || slices.Equal(backendTLS, []string{"", "", ""}), "backend-tls", "--backend-tls-* settings need --backend-tls")
	caches := c.Proxy.Cache.MaxBytes + c.Proxy.Streams.MaxHeldBytes
	check(c.MemoryLimit <= 0 || caches <= c.GoMemoryLimit(), "memory-limit", "%d bytes leave the Go heap %d (%d%%), less than the caches may hold: --cache-max-bytes + --stream-max-held-bytes = %d",
		c.MemoryLimit, c.GoMemoryLimit(), goMemoryPercent, caches)
	return errors.Join(errs...)
}

// CheckPeerTransport returns an error naming the settings unless the calls
// between replicas are mutual TLS (all of --peer-tls-cert-file,
// --peer-tls-key-file and --peer-tls-ca-file) or plain text by choice
// (--peer-plaintext), not both, and neither is set without --peers. Parse
// checks it; the sidecar checks it again before it dials its peers, for
// settings made otherwise.
func (c Settings) CheckPeerTransport() error {
	files := []string{c.PeerTLSCertFile, c.PeerTLSKeyFile, c.PeerTLSCAFile}
	mutualTLS := slices.ContainsFunc(files, func(f string) bool { return f != "" }) // asked for, whole or not
	tlsFlags := fmt.Sprintf("--peer-tls-cert-file, --peer-tls-key-file and --peer-tls-ca-file (%s, %s, %s)",
		EnvName("peer-tls-cert-file"), EnvName("peer-tls-key-file"), EnvName("peer-tls-ca-file"))
	switch {
	case c.Peers == "" && c.PeerPlaintext:
		return settingError("peer-plaintext", "is for peers (--peers), which are off")
	case c.Peers == "" && mutualTLS:
		return settingError("peer-tls-cert-file", "is for peers (--peers), which are off")
	case c.Peers == "":
		return nil
	case c.PeerPlaintext && mutualTLS:
		return settingError("peer-plaintext", "asks for plain text between replicas, but %s ask for mutual TLS: set one or the other", tlsFlags)
	case mutualTLS && slices.Contains(files, ""):
		return settingError("peer-tls-cert-file", "mutual TLS between replicas needs all of %s", tlsFlags)
	case !mutualTLS && !c.PeerPlaintext:
		return settingError("peers", "calls between replicas need mutual TLS: set %s, or --peer-plaintext (%s) to let replicas call each other "+
			"in plain text (the peer token still guards every call, but tokens, callers' headers and answers cross the network readable)", tlsFlags, EnvName("peer-plaintext"))
	}
	return nil
}

// settingError returns an error about a flag, naming it and its variable.
func settingError(flagName, format string, args ...any) error {
	return fmt.Errorf("--%s (%s): %s", flagName, EnvName(flagName), fmt.Sprintf(format, args...))
}

// loopbackHost reports whether host, of a listen address, is a loopback
// address or localhost.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// goMemoryPercent is the share of the container's memory limit the Go
// runtime's soft limit is set to. The rest is for memory the runtime does not
// count: the binary's mapped text, kernel socket buffers charged to the
// container, and the overshoot of a soft limit under a burst of allocation.
const goMemoryPercent = 90

// GoMemoryLimit returns the Go runtime's soft memory limit for the
// container's memory limit (goMemoryPercent of MemoryLimit); 0 when no limit
// is known.
func (c Settings) GoMemoryLimit() int64 {
	return c.MemoryLimit / 100 * goMemoryPercent
}

// listValue is a flag holding a comma-separated list; blanks are dropped.
type listValue struct{ list *[]string }

func (l listValue) String() string {
	if l.list == nil {
		return ""
	}
	return strings.Join(*l.list, ",")
}

func (l listValue) Set(s string) error {
	*l.list = (*l.list)[:0]
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*l.list = append(*l.list, item)
		}
	}
	return nil
}

// uint32Value is a flag holding a uint32, as the flag package's uint
// flag holds a uint. A value past uint32 is an error that wraps
// strconv.ErrRange, which bound reports as out of its range.
type uint32Value struct{ v *uint32 }

func (u uint32Value) String() string {
	if u.v == nil {
		return "0"
	}
	return strconv.FormatUint(uint64(*u.v), 10)
}

func (u uint32Value) Set(s string) error {
	n, err := strconv.ParseUint(s, 0, 32)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return fmt.Errorf("value out of range: %w", strconv.ErrRange)
	case err != nil:
		return errors.New("parse error") // the flag package's words
	}
	*u.v = uint32(n)
	return nil
}

func (u uint32Value) Get() any { return *u.v }

// collapseValue is the --default-collapse flag: auto, all or none.
type collapseValue struct{ mode *policy.Mode }

func (v collapseValue) String() string {
	if v.mode == nil {
		return "auto"
	}
	switch *v.mode {
	case policy.Always:
		return "all"
	case policy.Never:
		return "none"
	}
	return "auto"
}

func (v collapseValue) Set(s string) error {
	switch s {
	case "auto":
		*v.mode = policy.Auto
	case "all":
		*v.mode = policy.Always
	case "none":
		*v.mode = policy.Never
	default:
		return fmt.Errorf("want auto, all or none")
	}
	return nil
}

// notValue is a boolean flag that sets the opposite of what it says: the
// flag --cache-status=false sets OmitCacheStatus.
type notValue struct{ b *bool }

func (v notValue) String() string { return strconv.FormatBool(v.b == nil || !*v.b) }

func (v notValue) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if err == nil {
		*v.b = !on
	}
	return err
}

// IsBoolFlag lets the flag be given without a value, as a bool flag is.
func (notValue) IsBoolFlag() bool { return true }

// cacheControlValue is the --cache-control flag: honor or ignore.
type cacheControlValue struct{ ignore *bool }

func (v cacheControlValue) String() string {
	if v.ignore != nil && *v.ignore {
		return "ignore"
	}
	return "honor"
}

func (v cacheControlValue) Set(s string) error {
	ignore, err := policy.ParseCacheControl(s)
	if err == nil {
		*v.ignore = ignore
	}
	return err
}
