// Package strictjson decodes outside JSON documents strictly: one object,
// bounded size, no unknown, duplicate or case-aliased keys at any depth of
// struct fields (encoding/json alone matches keys case-insensitively and
// keeps the last duplicate), no trailing data.
//
// Rules:
//   - Errors are fixed phrases that never echo the input.
//   - The key checks recurse only where the target type has a struct
//     field, so their depth is the type's, never the input's.
//   - Decode always takes a size bound from its caller (the node agent's
//     configuration file, the Docker adapter's node section).
//   - It imports only the standard library.
package strictjson
