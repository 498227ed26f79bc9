import assert from "node:assert/strict";
import { maskWebhookUrl } from "../../../../control-plane/src/webhooks/url-mask";

describe("control-plane/webhooks: URL as a VIEWER sees it", () => {
  it("keeps scheme, host and port; masks user info, path, query and fragment", () => {
    assert.equal(
      maskWebhookUrl("https://hooks.slack.com/services/T000/B000/XXXXSECRET"),
      "https://hooks.slack.com/********",
    );
    assert.equal(maskWebhookUrl("http://127.0.0.1:8443/h?token=abc"), "http://127.0.0.1:8443/********");
    assert.equal(maskWebhookUrl("https://example.com/?key=s3cret"), "https://example.com/********");
    assert.equal(maskWebhookUrl("https://example.com/#s3cret"), "https://example.com/********");
    assert.equal(maskWebhookUrl("https://user:pw@example.com/"), "https://example.com/********");
    assert.equal(maskWebhookUrl("https://[2001:db8::1]:9000/x"), "https://[2001:db8::1]:9000/********");
    // Nothing to hide: shown as it is.
    assert.equal(maskWebhookUrl("https://example.com"), "https://example.com/");
    assert.equal(maskWebhookUrl("not a url"), "********");
    for (const u of [
      "https://a.example/p/s3cret",
      "https://u:s3cret@a.example/",
      "https://a.example/?s3cret",
    ]) {
      assert.doesNotMatch(maskWebhookUrl(u), /s3cret/);
    }
  });
});
