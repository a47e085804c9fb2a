// Package enrollmenttest gives the tests of enrollment tokens, of the node
// registry and of their admin adapter (core/enrollment, core/nodes,
// core/nodeadmin) a fresh database with an installation CA, the token
// logic and the enrollment service that consumes its tokens.
//
// Rules:
//   - It is imported only by tests.
//   - Each New is a real migrated database (core/store/storetest) with its
//     own installation CA: tests share nothing.
//   - A node is enrolled the way a node agent does it (an issued token, a
//     CSR of a fresh key, the enrollment service's Enroll: EnrollNode),
//     never by writing rows; what the store keeps (StoredSecretHash) is
//     read back from the database.
//   - It may import the logic packages it serves, the store and its test
//     helpers, platform/nodetls and errdefstest; never an admin adapter.
package enrollmenttest
