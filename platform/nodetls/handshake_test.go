package nodetls

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// pair is an installation with one node: the node agent's server
// configuration and Core's client configuration for dialing it.
type pair struct {
	ca       *CA
	nodeID   string
	nodeCert tls.Certificate
	coreCert tls.Certificate
	server   *tls.Config
	client   *tls.Config
}

// crafted is the subject of certificates made with craft.
var crafted = pkix.Name{Organization: []string{"Berth"}, CommonName: "crafted"}

func newPair(t *testing.T) pair {
	t.Helper()
	p := pair{ca: newTestCA(t), nodeID: newID(t)}
	now := time.Now()
	p.nodeCert = issueNode(t, p.ca, p.nodeID, now, time.Hour)
	p.coreCert = issueCore(t, p.ca, now, time.Hour)
	var err error
	if p.server, err = ServerConfig(p.nodeCert, p.ca.Certificate(), p.ca.InstallationID()); err != nil {
		t.Fatalf("ServerConfig: %v", err)
	}
	if p.client, err = ClientConfig(p.coreCert, p.ca.Certificate(), p.nodeID); err != nil {
		t.Fatalf("ClientConfig: %v", err)
	}
	return p
}

func TestMutualHandshake(t *testing.T) {
	p := newPair(t)
	state, serverErr, clientErr := handshake(t, p.server, p.client)
	if serverErr != nil || clientErr != nil {
		t.Fatalf("server error %v, client error %v", serverErr, clientErr)
	}
	if state.Version != tls.VersionTLS13 {
		t.Errorf("version %x, want TLS 1.3", state.Version)
	}
	if got, err := NodeIdentity(state.PeerCertificates[0]); err != nil || got != p.nodeID {
		t.Errorf("peer is %q, %v", got, err)
	}
	// Twice, to be sure nothing is cached into a weaker second handshake.
	if _, serverErr, clientErr := handshake(t, p.server, p.client); serverErr != nil || clientErr != nil {
		t.Fatalf("second handshake: server error %v, client error %v", serverErr, clientErr)
	}
}

func TestServerRejectsClientFromAnotherCA(t *testing.T) {
	p := newPair(t)
	// Another CA for the same installation id: same names, different key.
	impostor, err := NewCA(p.ca.InstallationID(), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cert := issueCore(t, impostor, time.Now(), time.Hour)
	_, serverErr, clientErr := handshake(t, p.server, rogueClient(&cert))
	wantRejected(t, serverErr, clientErr, "server", "unknown authority")
}

func TestServerRejectsWrongIdentity(t *testing.T) {
	p := newPair(t)
	now := time.Now()
	otherNode := issueNode(t, p.ca, newID(t), now, time.Hour)
	// Signed by the right CA but for Core of another installation, or a
	// node identity with ClientAuth: only an issuer bug or a stolen CA key
	// produces these, and the identity check still refuses them.
	otherCore := craft(t, p.ca.Certificate(), p.ca.key(), crafted, CoreURI(newID(t)), []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, now.Add(-time.Minute), now.Add(time.Hour))
	nodeAsClient := craft(t, p.ca.Certificate(), p.ca.key(), crafted, NodeURI(newID(t)), []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, now.Add(-time.Minute), now.Add(time.Hour))
	coreServer, err := p.ca.IssueCoreServer(p.ca.InstallationID(), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cert *tls.Certificate
		want string
	}{
		"no certificate":                   {nil, "client didn't provide a certificate"},
		"another installation's Core":      {&otherCore, "expected " + p.ca.InstallationID()},
		"a node certificate as client":     {&otherNode, "incompatible key usage"},
		"the node's own certificate":       {&p.nodeCert, "incompatible key usage"},
		"node identity with ClientAuth":    {&nodeAsClient, "want a berth core"},
		"Core's enrollment server cert":    {&coreServer, "incompatible key usage"},
		"Core's client cert, chain intact": {&p.coreCert, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, serverErr, clientErr := handshake(t, p.server, rogueClient(tc.cert))
			wantOutcome(t, serverErr, clientErr, "server", tc.want)
		})
	}
}

func TestClientRejectsWrongServer(t *testing.T) {
	p := newPair(t)
	now := time.Now()
	// A genuine, valid certificate of another node in the same installation:
	// the advertised address led to the wrong node.
	otherNode := issueNode(t, p.ca, newID(t), now, time.Hour)
	coreServer, err := p.ca.IssueCoreServer(p.ca.InstallationID(), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	impostor, err := NewCA(p.ca.InstallationID(), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	sameIDOtherCA := issueNode(t, impostor, p.nodeID, now, time.Hour)
	for name, tc := range map[string]struct {
		cert tls.Certificate
		want string
	}{
		"another node's certificate":      {otherNode, "it is node " + otherNode.Leaf.URIs[0].Opaque[len("berth:node:"):] + ", expected node " + p.nodeID},
		"Core's client certificate":       {p.coreCert, "incompatible key usage"},
		"Core's enrollment certificate":   {coreServer, "want a berth node"},
		"the node id from another CA":     {sameIDOtherCA, "unknown authority"},
		"the expected node (control)":     {p.nodeCert, ""},
		"another node, presenting the CA": {tls.Certificate{Certificate: [][]byte{otherNode.Certificate[0], p.ca.Certificate().Raw}, PrivateKey: otherNode.PrivateKey}, "expected node " + p.nodeID},
	} {
		t.Run(name, func(t *testing.T) {
			_, serverErr, clientErr := handshake(t, rogueServer(tc.cert), p.client)
			wantOutcome(t, serverErr, clientErr, "client", tc.want)
		})
	}
}

func TestExpiredAndNotYetValid(t *testing.T) {
	p := newPair(t)
	expiredAt := time.Now().Add(-3 * time.Hour)
	expiredNode := issueNode(t, p.ca, p.nodeID, expiredAt, time.Hour)
	expiredCore := issueCore(t, p.ca, expiredAt, time.Hour)
	futureNode := issueNode(t, p.ca, p.nodeID, time.Now().Add(2*time.Hour), time.Hour)
	futureCore := issueCore(t, p.ca, time.Now().Add(2*time.Hour), time.Hour)

	_, serverErr, clientErr := handshake(t, rogueServer(expiredNode), p.client)
	wantRejected(t, serverErr, clientErr, "client", "expired")
	_, serverErr, clientErr = handshake(t, rogueServer(futureNode), p.client)
	wantRejected(t, serverErr, clientErr, "client", "not yet valid")
	_, serverErr, clientErr = handshake(t, p.server, rogueClient(&expiredCore))
	wantRejected(t, serverErr, clientErr, "server", "expired")
	_, serverErr, clientErr = handshake(t, p.server, rogueClient(&futureCore))
	wantRejected(t, serverErr, clientErr, "server", "not yet valid")

	// A node agent configured with its expired certificate is refused by
	// Core in the handshake.
	cfg, err := ServerConfig(expiredNode, p.ca.Certificate(), p.ca.InstallationID())
	if err != nil {
		t.Fatal(err)
	}
	_, serverErr, clientErr = handshake(t, cfg, p.client)
	wantRejected(t, serverErr, clientErr, "client", "expired")
}

func TestForgedCertificates(t *testing.T) {
	p := newPair(t)
	now := time.Now()
	real := p.nodeCert.Leaf
	// Self-signed, copying the node's subject, URI, EKU and validity.
	selfSigned := craft(t, nil, nil, real.Subject, real.URIs[0].String(), real.ExtKeyUsage, real.NotBefore, real.NotAfter)
	// Claiming the real CA as issuer (same issuer name and authority key
	// id) but signed by the forger's key.
	fakeCA := *p.ca.Certificate()
	fakeCA.PublicKey = nil
	forgerKey, _ := NewNodeKey()
	claimed := craft(t, &fakeCA, forgerKey, real.Subject, real.URIs[0].String(), real.ExtKeyUsage, real.NotBefore, real.NotAfter)
	if claimed.Leaf.Issuer.String() != p.ca.Certificate().Subject.String() {
		t.Fatalf("forged issuer %q", claimed.Leaf.Issuer)
	}
	for name, cert := range map[string]tls.Certificate{"self-signed": selfSigned, "claims the CA": claimed} {
		t.Run("node "+name, func(t *testing.T) {
			_, serverErr, clientErr := handshake(t, rogueServer(cert), p.client)
			wantRejected(t, serverErr, clientErr, "client", "unknown authority")
		})
	}

	core := p.coreCert.Leaf
	selfSignedCore := craft(t, nil, nil, core.Subject, core.URIs[0].String(), core.ExtKeyUsage, core.NotBefore, core.NotAfter)
	claimedCore := craft(t, &fakeCA, forgerKey, core.Subject, core.URIs[0].String(), core.ExtKeyUsage, now.Add(-time.Minute), now.Add(time.Hour))
	for name, cert := range map[string]tls.Certificate{"self-signed": selfSignedCore, "claims the CA": claimedCore} {
		t.Run("core "+name, func(t *testing.T) {
			_, serverErr, clientErr := handshake(t, p.server, rogueClient(&cert))
			wantRejected(t, serverErr, clientErr, "server", "unknown authority")
		})
	}

	// A self-signed certificate posing as the CA itself, presented as a
	// leaf: refused because it is a CA certificate.
	caAsLeaf := tls.Certificate{Certificate: [][]byte{p.ca.Certificate().Raw}, PrivateKey: p.ca.key()}
	_, serverErr, clientErr := handshake(t, p.server, rogueClient(&caAsLeaf))
	wantRejected(t, serverErr, clientErr, "server", "CA certificate")
}

func TestPlaintextAndOldTLSRefused(t *testing.T) {
	p := newPair(t)

	// A plaintext client (gRPC without TLS starts with the HTTP/2 preface).
	conn, done := connectOnce(t, func(conn net.Conn) error {
		return tls.Server(conn, p.server).Handshake()
	})
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(conn)
	if err := <-done; err == nil {
		t.Fatal("server accepted a plaintext client")
	}
	if strings.Contains(string(reply), "HTTP") {
		t.Fatalf("server answered in plaintext: %q", reply)
	}

	// TLS 1.2 is refused even with a valid certificate.
	old := p.client.Clone()
	old.MinVersion, old.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	_, serverErr, clientErr := handshake(t, p.server, old)
	wantRejected(t, serverErr, clientErr, "server", "unsupported versions")
}

func TestConfigConstructionChecks(t *testing.T) {
	p := newPair(t)
	other := newTestCA(t)
	caCert := p.ca.Certificate()
	if _, err := ServerConfig(p.nodeCert, caCert, newID(t)); err == nil {
		t.Error("ServerConfig accepted an expected Core of another installation")
	}
	if _, err := ServerConfig(p.nodeCert, caCert, strings.ToUpper(p.ca.InstallationID())); err == nil {
		t.Error("ServerConfig accepted a non-canonical installation id")
	}
	if _, err := ServerConfig(p.nodeCert, other.Certificate(), other.InstallationID()); err == nil {
		t.Error("ServerConfig accepted a node certificate of another CA")
	}
	if _, err := ServerConfig(p.coreCert, caCert, p.ca.InstallationID()); err == nil {
		t.Error("ServerConfig accepted Core's certificate as the node's")
	}
	if _, err := ServerConfig(p.nodeCert, p.nodeCert.Leaf, p.ca.InstallationID()); err == nil {
		t.Error("ServerConfig accepted a leaf as CA")
	}
	if _, err := ServerConfig(tls.Certificate{}, caCert, p.ca.InstallationID()); err == nil {
		t.Error("ServerConfig accepted an empty certificate")
	}
	mismatched := p.nodeCert
	mismatched.PrivateKey = p.coreCert.PrivateKey
	if _, err := ServerConfig(mismatched, caCert, p.ca.InstallationID()); err == nil {
		t.Error("ServerConfig accepted a certificate with another key")
	}
	if _, err := ClientConfig(p.coreCert, caCert, "node-1"); err == nil {
		t.Error("ClientConfig accepted a non-UUID node id")
	}
	if _, err := ClientConfig(p.nodeCert, caCert, p.nodeID); err == nil {
		t.Error("ClientConfig accepted a node certificate as Core's")
	}
	if _, err := ClientConfig(issueCore(t, other, time.Now(), time.Hour), caCert, p.nodeID); err == nil {
		t.Error("ClientConfig accepted Core's certificate of another CA")
	}
	for _, cfg := range []*tls.Config{p.server, p.client} {
		if cfg.MinVersion != tls.VersionTLS13 || cfg.MaxVersion != tls.VersionTLS13 {
			t.Errorf("versions %x-%x", cfg.MinVersion, cfg.MaxVersion)
		}
	}
	if p.server.ClientAuth != tls.RequireAnyClientCert || p.server.VerifyConnection == nil || p.client.VerifyConnection == nil {
		t.Error("configuration does not require and verify peers")
	}
}

func TestPinnedConfig(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	coreServer, err := ca.IssueCoreServer(ca.InstallationID(), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	enroll, err := EnrollmentServerConfig(coreServer, ca.Certificate())
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := PinnedConfig(ca.Fingerprint())
	if err != nil {
		t.Fatal(err)
	}
	if _, serverErr, clientErr := handshake(t, enroll, pinned); serverErr != nil || clientErr != nil {
		t.Fatalf("pinned handshake: server error %v, client error %v", serverErr, clientErr)
	}

	other := newTestCA(t)
	wrongPin, err := PinnedConfig(other.Fingerprint())
	if err != nil {
		t.Fatal(err)
	}
	_, serverErr, clientErr := handshake(t, enroll, wrongPin)
	wantRejected(t, serverErr, clientErr, "client", "did not present the pinned CA")

	// An attacker with its own CA appends the (public) real CA certificate
	// to its chain: the pinned CA is present but did not sign the leaf.
	attacker, err := NewCA(ca.InstallationID(), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	attackerLeaf, err := attacker.IssueCoreServer(ca.InstallationID(), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	appended := tls.Certificate{
		Certificate: [][]byte{attackerLeaf.Certificate[0], ca.Certificate().Raw},
		PrivateKey:  attackerLeaf.PrivateKey,
	}
	leafOnly := tls.Certificate{Certificate: coreServer.Certificate[:1], PrivateKey: coreServer.PrivateKey}
	nodeCert := issueNode(t, ca, newID(t), now, time.Hour)
	nodeWithCA := tls.Certificate{Certificate: [][]byte{nodeCert.Certificate[0], ca.Certificate().Raw}, PrivateKey: nodeCert.PrivateKey}
	coreClient := issueCore(t, ca, now, time.Hour)
	coreClientWithCA := tls.Certificate{Certificate: [][]byte{coreClient.Certificate[0], ca.Certificate().Raw}, PrivateKey: coreClient.PrivateKey}
	expired, err := ca.IssueCoreServer(ca.InstallationID(), now.Add(-3*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cert tls.Certificate
		want string
	}{
		"attacker leaf + real CA":    {appended, "unknown authority"},
		"leaf without the CA":        {leafOnly, "did not present the pinned CA"},
		"a node certificate + CA":    {nodeWithCA, "want a berth core"},
		"Core's client cert + CA":    {coreClientWithCA, "incompatible key usage"},
		"expired Core server cert":   {expired, "expired"},
		"the CA presented as a leaf": {tls.Certificate{Certificate: [][]byte{ca.Certificate().Raw, ca.Certificate().Raw}, PrivateKey: ca.key()}, "CA certificate"},
		"attacker chain, its own CA": {attackerLeaf, "did not present the pinned CA"},
		"the real chain (control)":   {coreServer, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, serverErr, clientErr := handshake(t, rogueServer(tc.cert), pinned)
			wantOutcome(t, serverErr, clientErr, "client", tc.want)
		})
	}

	for _, bad := range []string{"", ca.Fingerprint()[len("sha256:"):], strings.ToUpper(ca.Fingerprint()), "sha1:" + strings.Repeat("a", 40), ca.Fingerprint() + "00"} {
		if _, err := PinnedConfig(bad); err == nil {
			t.Errorf("PinnedConfig(%q) succeeded", bad)
		}
	}
	if _, err := EnrollmentServerConfig(leafOnly, ca.Certificate()); err == nil {
		t.Error("EnrollmentServerConfig accepted a chain without the CA")
	}
	if _, err := EnrollmentServerConfig(coreClientWithCA, ca.Certificate()); err == nil {
		t.Error("EnrollmentServerConfig accepted Core's client certificate")
	}
}
