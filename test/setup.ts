// Loaded by mocha before every spec file (see .mocharc.json).
import "reflect-metadata";

process.env.LOG_LEVEL ??= "silent";
