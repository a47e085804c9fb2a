// Package admintest serves admin API services on a loopback port for tests
// and checks the admin API's error form, so every admin adapter's tests
// assert the wire the same way.
//
// Rules:
//   - It is imported only by tests (of core/admin and the core/<resource>admin
//     adapters), never by a production package.
//   - Serve starts the real admin server (core/admin) with the test's
//     Options: the token check, bounds, codec and interceptor under test
//     are the production ones, never a stand-in.
//   - Assertions read what a client sees: the gRPC code and the ErrorInfo
//     reason (WantStatus, WantInvalidField, WantUnauthenticated), pages
//     followed to their end (Pages, WantListed); never a message's text.
//   - It may import core/admin and the shared test helpers of sandbox
//     (errdefstest, errgrpctest); no logic package and no store.
package admintest
