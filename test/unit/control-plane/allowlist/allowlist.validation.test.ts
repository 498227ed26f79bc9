import assert from "node:assert/strict";
import { GraphQLError } from "graphql";
import { normaliseIp, normaliseOrigin } from "../../../../control-plane/src/allowlist/allowlist.validation";

function refused(fn: () => unknown): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof GraphQLError);
    assert.equal(e.extensions.code, "BAD_USER_INPUT");
    assert.equal(e.extensions.field, "value");
    return true;
  });
}

describe("control-plane: allowlist value validation", () => {
  it("accepts and normalises origins", () => {
    assert.equal(normaliseOrigin("https://app.example.com"), "https://app.example.com");
    assert.equal(normaliseOrigin("HTTPS://App.Example.COM/"), "https://app.example.com");
    assert.equal(normaliseOrigin("https://app.example.com:443"), "https://app.example.com");
    assert.equal(normaliseOrigin("http://localhost:3000"), "http://localhost:3000");
    assert.equal(normaliseOrigin("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
    assert.equal(normaliseOrigin(" *.Example.com "), "*.example.com");
  });

  it("refuses bad origins", () => {
    for (const v of [
      "",
      "app.example.com",
      "https://app.example.com/path",
      "https://app.example.com?x=1",
      "https://app.example.com#frag",
      "https://user:pw@app.example.com",
      "ftp://app.example.com",
      "*.com",
      "*example.com",
      "https://*.example.com",
      "https://exa mple.com",
      "https://-bad.example.com",
      "null",
      `https://${"a".repeat(260)}.com`,
    ]) {
      refused(() => normaliseOrigin(v));
    }
  });

  it("accepts and normalises IPv4, IPv6 and CIDR", () => {
    assert.equal(normaliseIp("203.0.113.7"), "203.0.113.7");
    assert.equal(normaliseIp("10.1.2.3/8"), "10.0.0.0/8");
    assert.equal(normaliseIp("192.168.1.0/24"), "192.168.1.0/24");
    assert.equal(normaliseIp("2001:DB8:0:0:0:0:0:1"), "2001:db8::1");
    assert.equal(normaliseIp("2001:db8::1/32"), "2001:db8::/32");
    assert.equal(normaliseIp("::ffff:198.51.100.4"), "198.51.100.4");
    assert.equal(normaliseIp("::1"), "::1");
  });

  it("refuses bad IPs and ranges", () => {
    for (const v of [
      "",
      "256.1.1.1",
      "1.2.3",
      "010.1.1.1",
      "1.2.3.4/33",
      "2001:db8::/129",
      "fe80::1%eth0",
      "example.com",
      "1.2.3.4/",
      "1.2.3.4/abc",
    ]) {
      refused(() => normaliseIp(v));
    }
  });
});
