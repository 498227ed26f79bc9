import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

// The console is served by the control plane at /console (same origin as /graphql).
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/console/",
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic" } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    chunkSizeWarningLimit: 1024,
  },
  server: { proxy: { "/graphql": "http://127.0.0.1:4000" } },
});
