// Package runtimebootstrap defines the Runtime bootstrap file: the bounded
// document a provider places in a sandbox so that berth-runtime can find and
// authenticate to Core.
//
// Rules: this package imports no Berth module (adapters, Core and the Runtime
// all import it). The credential is a Secret that never prints.
package runtimebootstrap
