import assert from "node:assert/strict";
import { CompiledAllowlist } from "../../../../data-plane/src/allowlist/allowlist";
import { clientIp, parseCidr, parseIp } from "../../../../data-plane/src/allowlist/ip";
import { GatewayError } from "../../../../shared/src/jsonrpc/errors";

const noIp = () => undefined;

describe("data-plane allowlist", () => {
  it("allows everything when empty", () => {
    const a = new CompiledAllowlist({ origins: [], ips: [] });
    assert.ok(a.empty);
    assert.equal(a.check("https://evil.example", noIp), undefined);
  });

  it("matches exact origins on scheme, host and port", () => {
    const a = new CompiledAllowlist({
      origins: ["https://App.Example.com", "http://localhost:3000"],
      ips: [],
    });
    assert.ok(a.originAllowed("https://app.example.com"));
    assert.ok(a.originAllowed("https://app.example.com:443"));
    assert.ok(!a.originAllowed("http://app.example.com"));
    assert.ok(!a.originAllowed("https://app.example.com:8443"));
    assert.ok(a.originAllowed("http://localhost:3000"));
    assert.ok(!a.originAllowed("http://localhost:3001"));
    assert.ok(!a.originAllowed(""));
    assert.ok(!a.originAllowed("null"));
    assert.equal(a.check("https://other.com", noIp), GatewayError.OriginNotAllowed);
  });

  it("wildcards match subdomains (any scheme, any port), not the apex or look-alikes", () => {
    const a = new CompiledAllowlist({ origins: ["*.example.com", "https://*.secure.org"], ips: [] });
    assert.ok(a.originAllowed("https://a.example.com"));
    assert.ok(a.originAllowed("http://a.b.example.com:8080"));
    assert.ok(!a.originAllowed("https://example.com"));
    assert.ok(!a.originAllowed("https://badexample.com"));
    assert.ok(!a.originAllowed("https://example.com.evil.io"));
    assert.ok(a.originAllowed("https://x.secure.org"));
    assert.ok(!a.originAllowed("http://x.secure.org"));
  });

  it("bare host entries match that host on any scheme", () => {
    const a = new CompiledAllowlist({ origins: ["dapp.io"], ips: [] });
    assert.ok(a.originAllowed("https://dapp.io"));
    assert.ok(a.originAllowed("http://dapp.io:1234"));
    assert.ok(!a.originAllowed("https://x.dapp.io"));
  });

  it("matches IPv4/IPv6 CIDRs and IPv4-mapped IPv6 clients", () => {
    const a = new CompiledAllowlist({ origins: [], ips: ["10.0.0.0/8", "2001:db8::/32", "192.168.1.7"] });
    const ip = (s: string) => () => parseIp(s);
    assert.equal(a.check("", ip("10.1.2.3")), undefined);
    assert.equal(a.check("", ip("::ffff:10.9.9.9")), undefined);
    assert.equal(a.check("", ip("2001:db8::1")), undefined);
    assert.equal(a.check("", ip("192.168.1.7")), undefined);
    assert.equal(a.check("", ip("192.168.1.8")), GatewayError.IpNotAllowed);
    assert.equal(a.check("", ip("2001:db9::1")), GatewayError.IpNotAllowed);
    assert.equal(a.check("", noIp), GatewayError.IpNotAllowed);
  });

  it("with both kinds, passes on ANY origin OR ANY IP", () => {
    const a = new CompiledAllowlist({ origins: ["https://ok.io"], ips: ["1.2.3.0/24"] });
    assert.equal(
      a.check("https://ok.io", () => parseIp("9.9.9.9")),
      undefined,
    );
    assert.equal(
      a.check("https://bad.io", () => parseIp("1.2.3.4")),
      undefined,
    );
    assert.equal(
      a.check("", () => parseIp("1.2.3.4")),
      undefined,
    );
    assert.equal(
      a.check("https://bad.io", () => parseIp("9.9.9.9")),
      GatewayError.OriginNotAllowed,
    );
    assert.equal(
      a.check("", () => parseIp("9.9.9.9")),
      GatewayError.IpNotAllowed,
    );
  });

  it("an unparsable IP entry still restricts (fails closed)", () => {
    const a = new CompiledAllowlist({ origins: [], ips: ["not-an-ip"] });
    assert.ok(!a.empty);
    assert.equal(
      a.check("", () => parseIp("1.1.1.1")),
      GatewayError.IpNotAllowed,
    );
  });

  it("uses X-Forwarded-For only from trusted proxies, right-most untrusted hop", () => {
    const trusted = [parseCidr("127.0.0.1/32")!, parseCidr("10.0.0.0/8")!];
    assert.equal(clientIp("127.0.0.1", "1.1.1.1, 2.2.2.2", trusted)?.toString(), "2.2.2.2");
    assert.equal(clientIp("127.0.0.1", "1.1.1.1, 2.2.2.2, 10.0.0.5", trusted)?.toString(), "2.2.2.2");
    assert.equal(clientIp("::ffff:127.0.0.1", "3.3.3.3", trusted)?.toString(), "3.3.3.3");
    assert.equal(clientIp("8.8.8.8", "1.1.1.1", trusted)?.toString(), "8.8.8.8");
    assert.equal(clientIp("127.0.0.1", "", trusted)?.toString(), "127.0.0.1");
    assert.equal(clientIp("127.0.0.1", "10.0.0.1, 10.0.0.2", trusted)?.toString(), "10.0.0.1");
    assert.equal(clientIp("127.0.0.1", "junk", trusted), undefined);
    assert.equal(clientIp("127.0.0.1", "1.1.1.1", [])?.toString(), "127.0.0.1");
  });
});
