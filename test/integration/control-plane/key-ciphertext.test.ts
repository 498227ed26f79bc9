import assert from "node:assert/strict";
import { createCipheriv, randomBytes } from "node:crypto";
import { createControlPlane } from "../../../control-plane/src/server";
import { deriveEncryptionKey } from "../../../shared/src/crypto/api-key";
import { ADMIN_TOKEN, code, createApp, Harness, startHarness } from "./harness";

const APP_KEY = `query($id: ID!) { app(id: $id) { id apiKey } }`;
const NODE_KEY = `query($id: ID!) { dedicatedNode(id: $id) { id apiKey endpoints { httpUrl } } }`;
const DEPLOY = `mutation($i: DeployDedicatedNodeInput!) { deployDedicatedNode(input: $i) { id apiKey } }`;

/** A ciphertext in the format written before row binding (v1: AES-256-GCM, no additional data). */
function legacyV1(plaintext: string, secret: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv("aes-256-gcm", deriveEncryptionKey(secret), iv);
  const ct = Buffer.concat([c.update(plaintext, "utf8"), c.final()]);
  return ["v1", iv, c.getAuthTag(), ct]
    .map((p) => (typeof p === "string" ? p : p.toString("base64url")))
    .join(".");
}

describe("control-plane: stored key ciphertexts are bound to their rows", () => {
  let h: Harness;
  let a: { token: string; workspaceId: string };
  let b: { token: string; workspaceId: string };
  before(async () => {
    h = await startHarness();
    a = await h.signUp();
    b = await h.signUp();
  });
  after(async () => {
    await h?.close();
  });

  const ciphertextOf = async (table: string, where: string, id: string): Promise<string> =>
    (await h.cp.dataSource.query(`SELECT key_ciphertext FROM ${table} WHERE ${where} = $1`, [id]))[0]
      .key_ciphertext;
  const setCiphertext = (table: string, where: string, id: string, ct: string) =>
    h.cp.dataSource.query(`UPDATE ${table} SET key_ciphertext = $1 WHERE ${where} = $2`, [ct, id]);

  it("new app keys are sealed as v2 and shown to their members", async () => {
    const app = await createApp(h, a.token, "fresh");
    assert.match(await ciphertextOf("api_keys", "app_id", app.id), /^v2\./);
    assert.equal((await h.ok(APP_KEY, { id: app.id }, a.token)).app.apiKey, app.apiKey);
  });

  it("a ciphertext copied from another workspace's app does not reveal that app's key", async () => {
    const appA = await createApp(h, a.token, "victim-a");
    const appB = await createApp(h, b.token, "source-b");
    const ctB = await ciphertextOf("api_keys", "app_id", appB.id);
    await setCiphertext("api_keys", "app_id", appA.id, ctB);
    const r = await h.gql(APP_KEY, { id: appA.id }, a.token);
    assert.equal(code(r), "KEY_UNREADABLE");
    assert.match(r.errors![0]!.message, /cannot be decrypted.*regenerate the key/);
    assert.ok(!JSON.stringify(r).includes(appB.apiKey), "B's key is not shown to A");
    assert.ok(!JSON.stringify(r).includes(appA.apiKey));
    // B's own row is untouched and still answers; A recovers by regenerating.
    assert.equal((await h.ok(APP_KEY, { id: appB.id }, b.token)).app.apiKey, appB.apiKey);
    const regen = await h.ok(
      `mutation($id: ID!) { regenerateApiKey(appId: $id) { apiKey } }`,
      { id: appA.id },
      a.token,
    );
    assert.equal((await h.ok(APP_KEY, { id: appA.id }, a.token)).app.apiKey, regen.regenerateApiKey.apiKey);
  });

  it("legacy v1 rows still open, are rewritten bound on read, and a v1 copy from another row is refused", async () => {
    const app = await createApp(h, a.token, "legacy");
    await setCiphertext("api_keys", "app_id", app.id, legacyV1(app.apiKey, h.config.keyEncryptionSecret));
    assert.equal((await h.ok(APP_KEY, { id: app.id }, a.token)).app.apiKey, app.apiKey);
    const after = await ciphertextOf("api_keys", "app_id", app.id);
    assert.match(after, /^v2\./, "rewritten as a bound ciphertext");
    assert.equal((await h.ok(APP_KEY, { id: app.id }, a.token)).app.apiKey, app.apiKey);

    // A v1 ciphertext carries no row binding: the key-hash check is what refuses another row's.
    const other = await createApp(h, b.token, "legacy-source");
    await setCiphertext("api_keys", "app_id", app.id, legacyV1(other.apiKey, h.config.keyEncryptionSecret));
    const r = await h.gql(APP_KEY, { id: app.id }, a.token);
    assert.equal(code(r), "KEY_UNREADABLE");
    assert.ok(!JSON.stringify(r).includes(other.apiKey));
    assert.match(await ciphertextOf("api_keys", "app_id", app.id), /^v1\./, "a refused row is not rewritten");
  });

  it("a starting control plane rewrites every legacy row bound; rows that do not open are left as they are", async () => {
    const apps = await Promise.all([1, 2, 3].map((i) => createApp(h, a.token, `boot-${i}`)));
    for (const app of apps)
      await setCiphertext("api_keys", "app_id", app.id, legacyV1(app.apiKey, h.config.keyEncryptionSecret));
    const foreign = await createApp(h, a.token, "boot-foreign");
    const foreignCt = legacyV1(foreign.apiKey, "another-secret-entirely-0123456789");
    await setCiphertext("api_keys", "app_id", foreign.id, foreignCt);

    const second = await createControlPlane(h.config, { host: "127.0.0.1", publishOnStart: false });
    await second.close();
    for (const app of apps) {
      assert.match(await ciphertextOf("api_keys", "app_id", app.id), /^v2\./);
      assert.equal((await h.ok(APP_KEY, { id: app.id }, a.token)).app.apiKey, app.apiKey);
    }
    assert.equal(await ciphertextOf("api_keys", "app_id", foreign.id), foreignCt);
    assert.equal(code(await h.gql(APP_KEY, { id: foreign.id }, a.token)), "KEY_UNREADABLE");
  });

  it("dedicated-node keys: bound to the node row; a swapped ciphertext is refused", async () => {
    await h.ok(
      `mutation { createNetwork(input: { slug: "dot-key", name: "Substrate", protocol: SUBSTRATE }) { id } }`,
      {},
      ADMIN_TOKEN,
    );
    await h.ok(
      `mutation($w: ID!) { setWorkspacePlan(workspaceId: $w, plan: "growth") { id } }`,
      { w: a.workspaceId },
      ADMIN_TOKEN,
    );
    const input = (displayName: string) => ({
      displayName,
      network: "dot-key",
      nodeType: "FULL",
      region: "local",
      lightningRestore: false,
      launchArgs: { rpcMethods: "SAFE", extra: [] },
    });
    const n1 = (await h.ok(DEPLOY, { i: input("n1") }, a.token)).deployDedicatedNode;
    const n2 = (await h.ok(DEPLOY, { i: input("n2") }, a.token)).deployDedicatedNode;
    assert.match(await ciphertextOf("dedicated_nodes", "id", n1.id), /^v2\./);
    assert.equal((await h.ok(NODE_KEY, { id: n1.id }, a.token)).dedicatedNode.apiKey, n1.apiKey);

    await setCiphertext("dedicated_nodes", "id", n1.id, await ciphertextOf("dedicated_nodes", "id", n2.id));
    const r = await h.gql(NODE_KEY, { id: n1.id }, a.token);
    assert.equal(code(r), "KEY_UNREADABLE");
    assert.ok(!JSON.stringify(r).includes(n2.apiKey), "n2's key is not shown as n1's");
    // Regenerating replaces the unreadable copy with a fresh key sealed to n1.
    const regen = await h.ok(
      `mutation($id: ID!) { regenerateDedicatedNodeApiKey(id: $id) { id apiKey } }`,
      { id: n1.id },
      a.token,
    );
    const fresh = regen.regenerateDedicatedNodeApiKey.apiKey;
    assert.notEqual(fresh, n1.apiKey);
    assert.equal((await h.ok(NODE_KEY, { id: n1.id }, a.token)).dedicatedNode.apiKey, fresh);
    n1.apiKey = fresh;

    // Legacy v1 node row: opens, and is rewritten bound.
    await setCiphertext("dedicated_nodes", "id", n1.id, legacyV1(n1.apiKey, h.config.keyEncryptionSecret));
    assert.equal((await h.ok(NODE_KEY, { id: n1.id }, a.token)).dedicatedNode.apiKey, n1.apiKey);
    const deadline = Date.now() + 5000;
    while (!(await ciphertextOf("dedicated_nodes", "id", n1.id)).startsWith("v2.")) {
      assert.ok(Date.now() < deadline, "node row rewritten bound");
      await new Promise((res) => setTimeout(res, 20));
    }
    assert.equal((await h.ok(NODE_KEY, { id: n1.id }, a.token)).dedicatedNode.apiKey, n1.apiKey);
  });
});
