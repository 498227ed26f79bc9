// Preloaded with `node --require` in a child process: loading any uWebSockets.js binary fails there, as it
// does on a platform, libc or Node ABI the package has no binary for. Other native addons load as usual.
import Module from "node:module";

// biome-ignore lint/suspicious/noExplicitAny: Node's internal extension table
const extensions = (Module as any)._extensions as Record<string, (m: unknown, file: string) => void>;
const loadNative = extensions[".node"];
extensions[".node"] = (m, file) => {
  if (/uws_[a-z0-9]+_[a-z0-9]+_\d+\.node$/.test(file)) {
    throw new Error(`${file}: cannot open shared object file (simulated by test/helpers/no-native-uws)`);
  }
  return loadNative(m, file);
};
