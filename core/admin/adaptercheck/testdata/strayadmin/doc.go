// Package strayadmin is an adapter that strays from the template in every
// way the check knows: it has no rules here.
package strayadmin

const Version = 1
