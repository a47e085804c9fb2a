// Package dist tests the release that `make dist` builds, from the outside:
// it runs make dist into a temporary folder and reads what an operator
// gets. The Debian packages are read with dpkg-deb (--info, --contents,
// --ctrl-tarfile) and unpacked with dpkg-deb -x into a throwaway folder,
// never installed; the extracted static binaries run; the units' ExecStart
// lines, with the example settings expanded as systemd would, are accepted
// by the binaries' flag parsing; the example configurations decode with the
// node agent's and the Docker adapter's own decoders; the runtime image
// archive holds the very berth-runtime of the release, and the real msb
// (BERTH_TEST_MSB, the pinned release) loads it under exactly the digest
// written beside it (.msb-digest, a microsandbox node's image_digest); the
// maintainer scripts run against stub commands; the runtime archive is
// the E2B template's build context (deploy/e2b/e2b.Dockerfile beside
// bin/berth-runtime). Without root, TestE2BTemplateMatchesTheRuntimeImage
// checks that template's definition against the runtime image's layout.
//
// make dist needs root (the runtime image's file owners): without it the
// test is skipped, and fails under CI=true; so does a missing
// BERTH_TEST_MSB. Under -short it is skipped.
package dist
