import assert from "node:assert/strict";
import type { LookupAddress } from "node:dns";
import {
  AddressRefusedError,
  addressRefusal,
  checkedLookup,
  validWebhookUrl,
} from "../../../../control-plane/src/webhooks/address-policy";

/** Runs the lookup as net.connect would (`all` as Happy Eyeballs asks, or the single-address form). */
function lookup(
  allowPrivate: boolean,
  host: string,
  all: boolean,
): Promise<{ err: Error | null; address: string | LookupAddress[] }> {
  return new Promise((resolve) =>
    checkedLookup(allowPrivate)(host, { all }, (err, address) => resolve({ err, address })),
  );
}

describe("control-plane: webhook address policy", () => {
  it("refuses loopback, private, link-local, CGNAT, unspecified and other non-public IPv4", () => {
    for (const a of [
      "127.0.0.1",
      "127.255.0.9",
      "10.0.0.1",
      "172.16.0.1",
      "172.31.255.255",
      "192.168.1.1",
      "100.64.0.1",
      "100.127.255.254",
      "169.254.169.254",
      "0.0.0.0",
      "0.1.2.3",
      "255.255.255.255",
      "224.0.0.1",
      "192.0.2.10",
      "198.18.0.1",
      "240.0.0.1",
    ]) {
      assert.notEqual(addressRefusal(a), null, a);
    }
    assert.match(addressRefusal("127.0.0.1")!, /loopback/);
    assert.match(addressRefusal("10.9.8.7")!, /private/);
    assert.match(addressRefusal("100.64.0.1")!, /carrierGradeNat/);
    assert.match(addressRefusal("169.254.169.254")!, /linkLocal/);
    assert.match(addressRefusal("0.0.0.0")!, /unspecified/);
  });

  it("refuses ::, ::1, ULA, link-local, multicast, IPv4-mapped and IPv4-compatible forms, NAT64, 6to4", () => {
    for (const a of [
      "::",
      "::1",
      "fc00::1",
      "fd12:3456::1",
      "fe80::1",
      "ff02::1",
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
      "::ffff:10.0.0.1",
      "::ffff:169.254.169.254",
      "::ffff:0.0.0.0",
      "::127.0.0.1",
      "::a00:1",
      "64:ff9b::a00:1",
      "2002:a00:1::1",
      "2001:db8::1",
    ]) {
      assert.notEqual(addressRefusal(a), null, a);
    }
    assert.match(addressRefusal("::ffff:127.0.0.1")!, /^IPv4-mapped 127\.0\.0\.1 is a loopback address$/);
    assert.match(addressRefusal("::1")!, /loopback/);
    assert.match(addressRefusal("fd00::1")!, /uniqueLocal/);
  });

  it("accepts public unicast addresses, including an IPv4-mapped public one", () => {
    for (const a of [
      "8.8.8.8",
      "1.1.1.1",
      "203.0.114.1",
      "2606:4700:4700::1111",
      "2a00:1450::1",
      "::ffff:8.8.8.8",
    ]) {
      assert.equal(addressRefusal(a), null, a);
    }
    assert.match(addressRefusal("example.com")!, /not an IP address/);
  });

  it("lookup: a name resolving to loopback is refused (both callback forms), allowed when private is allowed", async () => {
    for (const all of [true, false]) {
      const refused = await lookup(false, "localhost", all);
      assert.ok(refused.err instanceof AddressRefusedError, String(refused.err));
      assert.match(refused.err.message, /^localhost resolves to (127\.0\.0\.1|::1) is a loopback address$/);
    }
    const many = await lookup(true, "localhost", true);
    assert.equal(many.err, null);
    assert.ok(Array.isArray(many.address) && many.address.length > 0);
    const one = await lookup(true, "localhost", false);
    assert.equal(one.err, null);
    assert.match(one.address as string, /^(127\.0\.0\.1|::1)$/);
    // An IP literal given to the lookup is checked like a resolved name (Node skips lookups for literals;
    // the sender checks those itself).
    assert.ok((await lookup(false, "10.0.0.1", false)).err instanceof AddressRefusedError);
  });

  it("validWebhookUrl: http(s) only, no credentials, private literals refused unless allowed, normalised", () => {
    assert.equal(
      validWebhookUrl(" https://hooks.example.com/a?b=1 ", false),
      "https://hooks.example.com/a?b=1",
    );
    assert.equal(validWebhookUrl("http://0x7f.1:8080/x", true), "http://127.0.0.1:8080/x");
    assert.equal(validWebhookUrl("http://[::1]/", true), "http://[::1]/");
    assert.equal(validWebhookUrl("http://8.8.8.8/", false), "http://8.8.8.8/");
    const fails = (url: string, re: RegExp, allow = false) =>
      assert.throws(
        () => validWebhookUrl(url, allow),
        (e: { message: string; extensions?: { code?: string; field?: string } }) => {
          assert.equal(e.extensions?.code, "BAD_USER_INPUT");
          assert.equal(e.extensions?.field, "url");
          assert.match(e.message, re);
          return true;
        },
        url,
      );
    fails("ws://example.com/", /http:\/\/ or https:\/\//);
    fails("file:///etc/passwd", /http:\/\/ or https:\/\//);
    fails("javascript:alert(1)", /http:\/\/ or https:\/\//);
    fails("https://a:b@example.com/", /user name or password/, true);
    fails("https://:b@example.com/", /user name or password/, true);
    fails("", /1-2048/);
    fails("/relative", /Not a valid URL/);
    fails("http://127.0.0.1/", /loopback/);
    fails("http://2130706433/", /loopback/);
    fails("http://[::ffff:127.0.0.1]/", /IPv4-mapped 127\.0\.0\.1/);
    fails("http://[::ffff:a9fe:a9fe]/", /IPv4-mapped 169\.254\.169\.254/);
    fails("http://192.168.0.1/", /private/);
    // A name is judged when delivering (its answer can change), not here.
    assert.equal(validWebhookUrl("http://localhost:9/", false), "http://localhost:9/");
  });
});
