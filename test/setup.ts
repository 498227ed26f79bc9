// Loaded by mocha before every spec file (see .mocharc.json).
import "reflect-metadata";

process.env.LOG_LEVEL ??= "silent";
// A data plane, control plane or worker spawned by a test (main.js inherits this environment) takes a free
// metrics port, never the defaults 9464 / 9465 / 9466, which another run on the machine may hold; tests
// that scrape set their own.
process.env.METRICS_PORT ??= "0";
process.env.CONTROL_PLANE_METRICS_PORT ??= "0";
process.env.WORKER_METRICS_PORT ??= "0";
