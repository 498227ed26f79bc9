/**
 * Runs one bench section by itself (`node dist/bench/<name>.js`): the process exits 0 once `section`
 * settles, or 1 with the error's stack on stderr. Sections write their figures with writeResultsSection.
 */
export function runStandalone(name: string, section: () => Promise<void>): void {
  section().then(
    () => process.exit(0),
    (e: unknown) => {
      process.stderr.write(`${name} bench failed: ${e instanceof Error ? e.stack : String(e)}\n`);
      process.exit(1);
    },
  );
}
