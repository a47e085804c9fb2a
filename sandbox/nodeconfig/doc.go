// Package nodeconfig is the deployment-configuration adapter shared by node
// providers (today only Docker). A node provider's native settings live in
// each node's own configuration; its deployment configuration is therefore an
// empty public object, it takes no credential, and it offers neither
// configuration discovery nor credential replacement (the guide's "Register
// the provider kind", step 3).
//
// Rules:
//   - The adapter never passes request JSON through and its errors never
//     echo submitted values.
//   - A configuration belongs to one provider kind (Adapter.Kind); one of
//     another kind is refused, never converted.
//   - It imports the contract (sandbox, errdefs, providercontract) only.
package nodeconfig
