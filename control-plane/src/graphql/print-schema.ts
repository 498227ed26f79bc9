import "reflect-metadata";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { printControlPlaneSchema } from "./schema";

/** Repo root seen from dist/control-plane/src/graphql (or control-plane/src/graphql). */
export const SCHEMA_PATH = join(
  __dirname,
  __dirname.includes(`${"/"}dist${"/"}`) ? "../../../.." : "../../..",
  "schema.graphql",
);

async function main(): Promise<void> {
  writeFileSync(SCHEMA_PATH, await printControlPlaneSchema());
  process.stdout.write(`wrote ${SCHEMA_PATH}\n`);
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
