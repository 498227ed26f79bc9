// Loaded by mocha before every spec file (see .mocharc.json).
import "reflect-metadata";

process.env.LOG_LEVEL ??= "silent";
// A data plane spawned by a test (main.js inherits this environment) takes a free metrics port, never
// the default 9464, which another run on the machine may hold; tests that scrape set their own.
process.env.METRICS_PORT ??= "0";
