/**
 * A webhook URL as a VIEWER sees it: scheme, host and port kept (where events go), everything that
 * often carries a credential masked: user info, path, query and fragment become one `/********`.
 * `https://hooks.example.com/` stays as it is. Something that does not parse shows nothing.
 */
export function maskWebhookUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return "********";
  }
  const hidden =
    u.username !== "" || u.password !== "" || u.pathname !== "/" || u.search !== "" || u.hash !== "";
  return `${u.protocol}//${u.host}/${hidden ? "********" : ""}`;
}
