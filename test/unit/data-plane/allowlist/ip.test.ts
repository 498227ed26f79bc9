import assert from "node:assert/strict";
import { clientIp, ipBucket, parseCidr, parseIp } from "../../../../data-plane/src/allowlist/ip";

describe("data-plane per-IP bucket (ipBucket)", () => {
  const bucket = (text: string) => ipBucket(parseIp(text));

  it("keeps IPv4 per address, IPv4-mapped IPv6 included", () => {
    assert.equal(bucket("198.51.100.7"), "198.51.100.7");
    assert.equal(bucket("::ffff:198.51.100.7"), "198.51.100.7");
    assert.equal(bucket("::ffff:c633:6407"), "198.51.100.7");
    assert.notEqual(bucket("198.51.100.7"), bucket("198.51.100.8"));
  });

  it("buckets IPv6 per /64: addresses of one /64 share, other /64s do not", () => {
    const a = bucket("2001:db8:1:2::1");
    assert.equal(a, "2001:db8:1:2::/64");
    assert.equal(bucket("2001:db8:1:2:ffff:ffff:ffff:ffff"), a);
    assert.equal(bucket("2001:0db8:0001:0002:abcd:0:0:9"), a, "any spelling of the same /64");
    assert.equal(bucket("2001:DB8:1:2::abcd"), a, "upper case");
    assert.notEqual(bucket("2001:db8:1:3::1"), a);
    assert.notEqual(bucket("2001:db8:2:2::1"), a);
    assert.equal(bucket("::1"), "0:0:0:0::/64");
    assert.equal(bucket("fe80::1%eth0"), "fe80:0:0:0::/64");
  });

  it("puts unparsable addresses in one shared bucket", () => {
    assert.equal(ipBucket(undefined), "unknown");
    assert.equal(bucket("not an address"), "unknown");
  });

  it("buckets the X-Forwarded-For client of a trusted proxy per /64", () => {
    const trusted = [parseCidr("127.0.0.1/32")!];
    const one = ipBucket(clientIp("127.0.0.1", "2001:db8:aa:bb::1", trusted));
    const two = ipBucket(clientIp("127.0.0.1", "2001:db8:aa:bb::2", trusted));
    const other = ipBucket(clientIp("127.0.0.1", "2001:db8:aa:bc::1", trusted));
    assert.equal(one, two);
    assert.notEqual(one, other);
    // An untrusted peer's header is ignored: the peer itself is the client.
    assert.equal(ipBucket(clientIp("192.0.2.1", "2001:db8:aa:bb::1", trusted)), "192.0.2.1");
  });
});
