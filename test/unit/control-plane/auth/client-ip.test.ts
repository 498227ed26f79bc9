import assert from "node:assert/strict";
import {
  clientIp,
  parseTrustedProxies,
  throttleSubject,
  validTrustedProxies,
} from "../../../../control-plane/src/auth/client-ip";
import { loadConfig } from "../../../../control-plane/src/config";

describe("control-plane: client IP behind trusted proxies", () => {
  const ranges = parseTrustedProxies(["10.0.0.0/8", "::1"]);

  it("uses the socket peer when no proxy is trusted or the peer is not trusted", () => {
    assert.equal(clientIp("203.0.113.9", "1.2.3.4", []), "203.0.113.9");
    assert.equal(clientIp("203.0.113.9", "1.2.3.4", ranges), "203.0.113.9", "spoofed header ignored");
    assert.equal(clientIp("::ffff:203.0.113.9", undefined, ranges), "203.0.113.9");
  });

  it("reads X-Forwarded-For from the right, skipping trusted hops", () => {
    assert.equal(clientIp("10.0.0.2", "198.51.100.1, 203.0.113.5, 10.0.0.7", ranges), "203.0.113.5");
    assert.equal(clientIp("::1", "2001:db8::5", ranges), "2001:db8::5");
    assert.equal(clientIp("10.0.0.2", "10.1.1.1", ranges), "10.1.1.1");
    assert.equal(clientIp("10.0.0.2", "garbage, 10.0.0.3", ranges), "10.0.0.3");
    assert.equal(clientIp("10.0.0.2", undefined, ranges), "10.0.0.2");
  });

  it("validates TRUSTED_PROXIES in config", () => {
    assert.ok(validTrustedProxies(["10.0.0.0/8", "192.168.1.1", "fd00::/8"]));
    assert.ok(!validTrustedProxies(["10.0.0.0/33"]));
    assert.deepEqual(loadConfig({ TRUSTED_PROXIES: "10.0.0.0/8, 127.0.0.1" }).trustedProxies, [
      "10.0.0.0/8",
      "127.0.0.1",
    ]);
    assert.throws(() => loadConfig({ TRUSTED_PROXIES: "nope" }), /TRUSTED_PROXIES/);
  });

  it("throttles IPv6 clients per /64, IPv4 (and IPv4-mapped) per address", () => {
    assert.equal(throttleSubject("2001:db8:1:2::1"), "2001:db8:1:2::/64");
    assert.equal(throttleSubject("2001:0db8:0001:0002:ffff:ffff:ffff:ffff"), "2001:db8:1:2::/64");
    assert.notEqual(throttleSubject("2001:db8:1:3::1"), throttleSubject("2001:db8:1:2::1"));
    assert.equal(throttleSubject("203.0.113.7"), "203.0.113.7");
    assert.equal(throttleSubject("::ffff:203.0.113.7"), "203.0.113.7");
    assert.notEqual(throttleSubject("203.0.113.8"), throttleSubject("203.0.113.7"));
    assert.equal(throttleSubject("cli"), "cli");
  });
});
