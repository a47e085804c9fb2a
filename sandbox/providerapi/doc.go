// Package providerapi holds the types of a provider registration: what an
// adapter package fills in (Registration) and what construction passes and
// returns (LocalRequest, Built, DirectRequest, DirectBuilt). Adapters
// import it to build their entry; package providers imports the adapters
// for its one registration table and re-exports these types under the
// guide's names (providers.Registration, providers.Built, ...).
//
// Rules:
//   - Types only, no logic; validation lives in package providers
//     (ValidateRegistration).
//   - It imports the contract (sandbox, providercontract) only, so an
//     adapter can fill in its entry without importing the table that
//     imports it.
package providerapi
