import uWS from "uWebSockets.js";
import { readdirSync } from "node:fs";
import { dirname } from "node:path";

/**
 * "uWebSockets.js" is data-plane/uws: it loads @btc-vision/uwebsockets.js (`uws_{platform}_{arch}_{ABI}.node`),
 * or on glibc 2.36/2.37 the copy `npm ci` retargeted (scripts/uws-glibc-compat.js). When neither loads
 * (no binary for this Node's ABI or platform, musl, an older glibc) it exports functions that only throw,
 * with the reason in `loadError`. The data plane refuses to start on that, saying why, before it connects
 * anywhere: a server that failed on its first request instead would look healthy to its supervisor.
 */
export class NativeUwsError extends Error {
  override name = "NativeUwsError";
}

/** True when `mod` is the native addon: its exports are C++ functions, a stand-in's are JavaScript. */
export function isNativeUws(mod: unknown): boolean {
  const app = (mod as { App?: unknown } | null)?.App;
  return typeof app === "function" && Function.prototype.toString.call(app).includes("[native code]");
}

/** ABIs the installed package ships a binary for on this platform and architecture (for the message). */
export function shippedAbis(platform: string = process.platform, arch: string = process.arch): string[] {
  try {
    const dir = dirname(require.resolve("@btc-vision/uwebsockets.js"));
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
  const loadError = (mod as { loadError?: unknown } | null)?.loadError;
  const abis = shippedAbis();
  throw new NativeUwsError(
    `uWebSockets.js: the native binding did not load (Node ${process.version}, ABI ${process.versions.modules}, ` +
      `${process.platform}-${process.arch})${typeof loadError === "string" ? `: ${loadError}` : ""}. ` +
      `The installed package ships binaries for ABI ${abis.length > 0 ? abis.join(", ") : "(none found)"} on ` +
      `${process.platform}-${process.arch}. Run the data plane on Node 24 (package.json "engines", ABI 137) ` +
      "with glibc 2.36 or later (docs/runtime.md).",
  );
}
