// Package installation is the logic of the installation as Core reports
// it: the stable identity claimed at first start, the public URL, the
// serving Core's owner epoch, the CA fingerprint, the current deployment
// generation and the build version. core/installationadmin is its thin
// berth.admin.v1.InstallationService adapter.
//
// Rules:
//   - It only reads. The identity is claimed once by the daemon
//     (store.ClaimInstallation); nothing here writes.
//   - Everything but the serving Core's own facts (owner epoch, CA
//     fingerprint, version, given to New) comes from the database on every
//     call, so a standby that took over reports the current deployment.
//   - It declares the narrow Store it uses and returns errdefs classes; it
//     imports the store and errdefs only, never the admin API.
package installation
