# The Berth Runtime as an application-managed E2B template
# (deploy/e2b/README.md). The build context is a Berth release's
# berth-runtime archive, or what `scripts/build-runtime-image --e2b-context
# DIR` writes: this file as e2b.Dockerfile and the release's static
# berth-runtime as bin/berth-runtime, the very binary of the runtime image.
#
# It mirrors the runtime image's layout (scripts/build-runtime-image): the
# runtime user and group 1000:1000 with the private home /home/runtime, the
# directories /workspace and /environment/{workspace,staging,initialization,
# packages} owned by it, berth-runtime at /usr/local/bin/berth-runtime, the
# working directory /workspace. test/dist's TestE2BTemplateMatchesTheRuntimeImage
# fails when the two drift apart.
#
# E2B's builder, not Docker, runs it: one stage only; it reads
# /etc/os-release (Debian has one; the runtime image's busybox root has
# none, so it cannot be the base), adds envd, its own packages and its user
# "user" (uid 1001 here, since runtime takes 1000) after these steps.
# Debian's coreutils is essential, so /usr/bin/install, which the adapter
# writes the bootstrap file with, is there. No CMD or ENTRYPOINT: the
# template has no start command; the adapter starts berth-runtime after
# each create, with a bootstrap file of that allocation.
FROM debian:12-slim

RUN groupadd --gid 1000 runtime && \
    useradd --uid 1000 --gid 1000 --home-dir /home/runtime --create-home --shell /bin/sh runtime && \
    chmod 0700 /home/runtime && \
    install -d -o 1000 -g 1000 -m 0755 /workspace /environment /environment/workspace /environment/staging /environment/initialization /environment/packages

COPY bin/berth-runtime /usr/local/bin/berth-runtime

RUN chown 0:0 /usr/local/bin/berth-runtime && chmod 0755 /usr/local/bin/berth-runtime

WORKDIR /workspace

USER runtime
