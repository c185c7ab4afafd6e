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

	envTLSCert              = "COLLAPSER_TLS_CERT_FILE"
	envTLSKey               = "COLLAPSER_TLS_KEY_FILE"
	envTLSClientCA          = "COLLAPSER_TLS_CLIENT_CA_FILE"
	envBackendTLS           = "COLLAPSER_BACKEND_TLS"
	envBackendTLSCA         = "COLLAPSER_BACKEND_TLS_CA_FILE"
	envBackendTLSServerName = "COLLAPSER_BACKEND_TLS_SERVER_NAME"
)

// envBackendTLSCert and envBackendTLSKey are the certificate the sidecar
// presents to its backend: injection does not set them, but they take
// effect only with envBackendTLS, a per-pod setting, so the template must
// not set them either.
const (
	envBackendTLSCert = "COLLAPSER_BACKEND_TLS_CERT_FILE"
	envBackendTLSKey  = "COLLAPSER_BACKEND_TLS_KEY_FILE"
)

// envAdminListen is where the sidecar serves its admin service: injection
// does not set it, but counts its port among the sidecar's.
const envAdminListen = "COLLAPSER_ADMIN_LISTEN"
