/**
 * Usage recording (docs/contracts.md#usage-stream; the flow: docs/architecture.md#a-usage-record).
 *
 * Wiring: construct one `RedisUsageRecorder` per process with the data plane's Redis client, its
 * `RedisNames` and `/metrics` registry, and `loadUsageRecorderConfig()` (USAGE_* variables); call `start()`.
 * Call `record()` once per answered request object (or once per group with `units`), after its category is
 * known, including rejections (401/403/404/429...) with null workspace/app when the key is unknown and on
 * the public endpoint. On SIGTERM: stop accepting, drain in-flight requests, then `await recorder.close()`.
 * Tests and tools that need no usage use `NoopUsageRecorder`.
 *
 * The data plane does this in `startDataPlane` (`createUsageRecorder`, USAGE_MODE); every transport records
 * through the request pipeline's accounting (data-plane/src/pipeline/account.ts).
 */
export { createUsageRecorder, type OwnedUsageRecorder } from "./create";
export {
  loadUsageRecorderConfig,
  NoopUsageRecorder,
  RedisUsageRecorder,
  type UsageContext,
  type UsageRecorder,
  type UsageRecorderConfig,
  type UsageRecorderDeps,
  type UsageRedis,
  usageRecorderEnvShape,
} from "./recorder";
