// Package services holds smoke tests for Berth's test services: they prove
// that the Docker Engine and the PostgreSQL database given by
// scripts/test-services (through berth.dev/sandbox/testenv) are real and
// have the features Berth depends on.
package services
