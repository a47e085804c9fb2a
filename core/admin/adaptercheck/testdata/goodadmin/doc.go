// Package goodadmin is a conforming adapter.
//
// Rules:
//   - It only converts.
package goodadmin
