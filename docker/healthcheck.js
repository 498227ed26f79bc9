#!/usr/bin/env node
// The image's HEALTHCHECK. One image runs three processes (compose and Kubernetes pick the command), so
// this reads what PID 1 runs and asks that process: the control plane's and the data plane's `/healthz`
// (liveness: the process serves; `/readyz` also needs Postgres/Redis and the upstreams, which is the
// orchestrator's readiness question, not Docker's restart one). The worker and the migration job serve no
// HTTP: their container is healthy while PID 1 runs, which Docker already knows, so this exits 0.

const { readFileSync } = require("node:fs");

function entry() {
  try {
    return readFileSync("/proc/1/cmdline", "utf8").split("\0").join(" ");
  } catch {
    return "";
  }
}

/** Where a client inside the container reaches a listener bound to `host`. */
function reachable(host) {
  if (host === undefined || host === "" || host === "0.0.0.0" || host === "::") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}

function target(cmdline, env) {
  if (cmdline.includes("dist/data-plane/src/main.js")) {
    return `http://${reachable(env.DATA_PLANE_HOST)}:${env.DATA_PLANE_PORT || "8080"}/healthz`;
  }
  if (cmdline.includes("dist/control-plane/src/main.js")) {
    return `http://${reachable(env.CONTROL_PLANE_HOST)}:${env.CONTROL_PLANE_PORT || "4000"}/healthz`;
  }
  return null;
}

module.exports = { target };

if (require.main === module) {
  const url = target(entry(), process.env);
  if (url === null) process.exit(0);
  fetch(url, { signal: AbortSignal.timeout(2500) }).then(
    (r) => process.exit(r.ok ? 0 : 1),
    () => process.exit(1),
  );
}
