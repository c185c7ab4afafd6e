package inject

// The sidecar's environment variables that per-pod settings set: each is
// COLLAPSER_ and its flag in upper snake case (package config; a test
// holds them to config.EnvName).
const (
	envListen        = "COLLAPSER_LISTEN"
	envMetricsListen = "COLLAPSER_METRICS_LISTEN"
	envBackend       = "COLLAPSER_BACKEND"
	envCacheTTL      = "COLLAPSER_CACHE_TTL"
	envPeers         = "COLLAPSER_PEERS"
	envReplicas      = "COLLAPSER_REPLICAS"
	envPeerListen    = "COLLAPSER_PEER_LISTEN"
	envPolicyFile    = "COLLAPSER_POLICY_FILE"
	envPeerTokenFile = "COLLAPSER_PEER_TOKEN_FILE"
	envPeerTLSCert   = "COLLAPSER_PEER_TLS_CERT_FILE"
	envPeerTLSKey    = "COLLAPSER_PEER_TLS_KEY_FILE"
	envPeerTLSCA     = "COLLAPSER_PEER_TLS_CA_FILE"
)

// envAdminListen is where the sidecar serves its admin service: injection
// does not set it, but counts its port among the sidecar's.
const envAdminListen = "COLLAPSER_ADMIN_LISTEN"
