import uWS from "uWebSockets.js";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";

/**
 * The uWS fork we use (@trufflesuite/uws-js-unofficial) loads `binaries/uws_{platform}_{arch}_{ABI}.node`
 * and, when there is none for this Node (it ships ABI 93/108/115 = Node 16/18/20 only) or
 * UWS_USE_FALLBACK is set, prints a warning and silently returns a JavaScript shim built on `ws` and
 * node:http. The shim lacks most of uWS (no getParts, no publish, different back-pressure and close
 * semantics) and is many times slower, so a data plane on it would be a different, untested server.
 * The data plane refuses to start on it instead.
 */
export class NativeUwsError extends Error {
  override name = "NativeUwsError";
}

/** True when `mod` is the native addon: its exports are C++ functions, the shim's are JavaScript. */
export function isNativeUws(mod: unknown): boolean {
  const app = (mod as { App?: unknown } | null)?.App;
  return typeof app === "function" && Function.prototype.toString.call(app).includes("[native code]");
}

/** ABIs the installed fork ships a binary for on this platform and architecture (for the message). */
export function shippedAbis(platform: string = process.platform, arch: string = process.arch): string[] {
  try {
    const dir = join(dirname(require.resolve("uWebSockets.js")), "..", "binaries");
    const prefix = `uws_${platform}_${arch}_`;
    return readdirSync(dir)
      .filter((f) => f.startsWith(prefix) && f.endsWith(".node"))
      .map((f) => f.slice(prefix.length, -".node".length))
      .sort((a, b) => Number(a) - Number(b));
  } catch {
    return [];
  }
}

/** Throws a NativeUwsError that says why and what to do when `mod` is not the native addon. */
export function assertNativeUws(mod: unknown = uWS): void {
  if (isNativeUws(mod)) return;
  const abis = shippedAbis();
  const forced = /^(true|1)$/i.test(process.env.UWS_USE_FALLBACK ?? "");
  throw new NativeUwsError(
    `uWebSockets.js: the native binding did not load (${
      forced
        ? "UWS_USE_FALLBACK is set"
        : `Node ${process.version}, ABI ${process.versions.modules}, ${process.platform}-${process.arch}`
    }) and the data plane does not run on the fork's JavaScript fallback. ` +
      `The installed fork ships binaries for ABI ${abis.length > 0 ? abis.join(", ") : "(none found)"} on ` +
      `${process.platform}-${process.arch}; ABI 115 is Node 20: run the data plane on Node 20 ` +
      `(package.json "engines")${forced ? " and unset UWS_USE_FALLBACK" : ""}.`,
  );
}
