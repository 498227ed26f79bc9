import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  can,
  maskKey,
  outranks,
  Permission,
  ROLE_TABLE,
  ROLES,
  roleArticle,
  roleTableMarkdown,
  WorkspaceRole,
} from "../../../../control-plane/src/workspaces/roles";
import { generateApiKey } from "../../../../shared/src/crypto/api-key";

const TEAMS_DOC = readFileSync(join(__dirname, "../../../../../docs/teams.md"), "utf8");

/** The cells of a markdown table (alignment row dropped), trimmed. */
function tableCells(markdown: string): string[][] {
  return markdown
    .split("\n")
    .filter((l) => l.trim().startsWith("|"))
    .map((l) =>
      l
        .trim()
        .replace(/^\||\|$/g, "")
        .split("|")
        .map((c) => c.trim()),
    )
    .filter((row) => !row.every((c) => /^:?-+:?$/.test(c)));
}

describe("control-plane: the role table", () => {
  const { OWNER, ADMIN, MEMBER, VIEWER } = WorkspaceRole;

  it("names every permission once", () => {
    const perms = ROLE_TABLE.map((r) => r.permission);
    assert.deepEqual([...perms].sort(), Object.values(Permission).sort());
  });

  it("grants as the issue says: OWNER everything, ADMIN all but plan and ownership (billing statements included), MEMBER uses, VIEWER reads", () => {
    const grants = (role: WorkspaceRole) => Object.values(Permission).filter((p) => can(role, p));
    assert.deepEqual(
      grants(OWNER),
      Object.values(Permission).filter((p) => p !== Permission.Leave),
    );
    assert.deepEqual(grants(ADMIN).sort(), [
      Permission.CreateApps,
      Permission.Leave,
      Permission.ManageAccessRules,
      Permission.ManageApps,
      Permission.ManageKeys,
      Permission.ManageMembers,
      Permission.ManageNodes,
      Permission.ManageWebhooks,
      Permission.Read,
      Permission.ReadBilling,
      Permission.ReadKeys,
    ]);
    assert.deepEqual(grants(MEMBER).sort(), [
      Permission.CreateApps,
      Permission.Leave,
      Permission.Read,
      Permission.ReadKeys,
    ]);
    assert.deepEqual(grants(VIEWER).sort(), [Permission.Leave, Permission.Read]);
  });

  it("ranks roles strictly: a role manages only the ones below it", () => {
    assert.deepEqual(ROLES, [OWNER, ADMIN, MEMBER, VIEWER]);
    for (const [i, a] of ROLES.entries()) {
      for (const [j, b] of ROLES.entries()) assert.equal(outranks(a, b), i < j, `${a} over ${b}`);
    }
    assert.equal(roleArticle(OWNER), "An OWNER");
    assert.equal(roleArticle(VIEWER), "A VIEWER");
  });

  it("masks a key into something that is never a key", () => {
    const key = generateApiKey();
    const masked = maskKey(key);
    assert.equal(masked, `${key.slice(0, 4)}********${key.slice(-4)}`);
    assert.doesNotMatch(masked, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(encodeURIComponent(masked), masked, "safe inside a URL as it is");
    assert.equal(maskKey("short"), "********");
  });

  it("is printed in docs/teams.md, cell for cell", () => {
    const at = TEAMS_DOC.indexOf("<!-- role-table -->");
    assert.ok(at > 0, "docs/teams.md has <!-- role-table -->");
    const rest = TEAMS_DOC.slice(at).split("\n").slice(1);
    const start = rest.findIndex((l) => l.trim().startsWith("|"));
    const end = rest.findIndex((l, i) => i > start && !l.trim().startsWith("|"));
    assert.deepEqual(tableCells(rest.slice(start, end).join("\n")), tableCells(roleTableMarkdown()));
  });
});
