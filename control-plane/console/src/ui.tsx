import { type DependencyList, type ReactNode, useCallback, useEffect, useRef, useState } from "react";
import { errorMessage, GqlError } from "./api";

export interface QueryState<T> {
  data: T | null;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

/** Runs `fn` on mount and when `deps` change; `pollMs` re-runs it quietly (no loading flash). */
export function useQuery<T>(fn: () => Promise<T>, deps: DependencyList, pollMs?: number): QueryState<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const seq = useRef(0);
  const run = useCallback((quiet: boolean) => {
    const n = ++seq.current;
    if (!quiet) setLoading(true);
    fn().then(
      (d) => {
        if (n !== seq.current) return;
        setData(d);
        setError(null);
        setLoading(false);
      },
      (e) => {
        if (n !== seq.current) return;
        setError(e);
        setLoading(false);
      },
    );
    // biome-ignore lint/correctness/useExhaustiveDependencies: the caller's deps decide when to re-run
  }, deps);
  useEffect(() => {
    run(false);
    if (!pollMs) return;
    const t = setInterval(() => run(true), pollMs);
    return () => clearInterval(t);
  }, [run, pollMs]);
  return { data, error, loading, reload: () => run(true) };
}

export function Loading({ what = "Loading" }: { what?: string }) {
  return (
    <div className="loading" role="status">
      <span className="spinner" aria-hidden="true" /> {what}…
    </div>
  );
}

export function ErrorBox({ error, retry }: { error: unknown; retry?: () => void }) {
  if (!error) return null;
  const msg = error instanceof GqlError ? (error.general ?? error.message) : errorMessage(error);
  return (
    <div className="error" role="alert">
      {msg}
      {retry && (
        <button type="button" className="link" onClick={retry}>
          Retry
        </button>
      )}
    </div>
  );
}

/** Loading and error states around a query's data. */
export function Async<T>({ q, children }: { q: QueryState<T>; children: (data: T) => ReactNode }) {
  if (q.data === null && q.loading) return <Loading />;
  if (q.data === null) return <ErrorBox error={q.error} retry={q.reload} />;
  return (
    <>
      {q.error ? <ErrorBox error={q.error} retry={q.reload} /> : null}
      {children(q.data)}
    </>
  );
}

/** The message for `field` from a GraphQL error's extensions.field. */
export function FieldError({ error, field }: { error: unknown; field: string }) {
  if (!(error instanceof GqlError) || !error.fields[field]) return null;
  return (
    <div className="field-error" data-field={field} role="alert">
      {error.fields[field]}
    </div>
  );
}

/**
 * A control (input, select, textarea) wrapped in its label, so the label's text is its accessible name,
 * then the inline message for `field`. Fields whose messages are shown further down (after a row of
 * fields, or in an order of their own) leave `error` and `field` out and render their FieldErrors there.
 */
export function Field({
  label,
  className,
  children,
  error,
  field,
}: {
  label: ReactNode;
  className?: string;
  children: ReactNode;
} & ({ error: unknown; field: string } | { error?: never; field?: never })) {
  return (
    <>
      {/* biome-ignore lint/a11y/noLabelWithoutControl: the control is `children`, which the rule cannot see */}
      <label className={className}>
        {label}
        {children}
      </label>
      {field !== undefined && <FieldError error={error} field={field} />}
    </>
  );
}

/** Errors of a form that are not tied to one of its `fields`. */
export function FormError({ error, fields }: { error: unknown; fields: string[] }) {
  if (!error) return null;
  if (error instanceof GqlError) {
    const other = error.errors.filter((e) => {
      const f = e.extensions?.field;
      return typeof f !== "string" || !fields.includes(f);
    });
    if (other.length === 0) return null;
    return (
      <div className="error" role="alert">
        {other.map((e) => e.message).join("; ")}
      </div>
    );
  }
  return (
    <div className="error" role="alert">
      {errorMessage(error)}
    </div>
  );
}

export function CopyButton({ text, label = "Copy" }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // Clipboard API needs a secure context: fall back to a hidden textarea.
      const ta = document.createElement("textarea");
      ta.value = text;
      document.body.appendChild(ta);
      ta.select();
      document.execCommand("copy");
      ta.remove();
    }
    setCopied(true);
    setTimeout(() => setCopied(false), 1500);
  };
  return (
    <button type="button" className="small" onClick={copy} aria-label={`${label}: ${text.slice(0, 40)}`}>
      {copied ? "Copied" : label}
    </button>
  );
}

export function ConfirmDialog({
  title,
  children,
  confirmLabel,
  onConfirm,
  onCancel,
  busy,
}: {
  title: string;
  children: ReactNode;
  confirmLabel: string;
  onConfirm: () => void;
  onCancel: () => void;
  busy?: boolean;
}) {
  return (
    <div className="overlay">
      <div className="dialog" role="dialog" aria-modal="true" aria-labelledby="dialog-title">
        <h3 id="dialog-title">{title}</h3>
        {children}
        <div className="row end">
          <button type="button" className="secondary" onClick={onCancel} disabled={busy}>
            Cancel
          </button>
          <button type="button" className="danger" onClick={onConfirm} disabled={busy}>
            {busy ? "Working…" : confirmLabel}
          </button>
        </div>
      </div>
    </div>
  );
}

export const fmt = new Intl.NumberFormat("en-US");
export function fmtNum(n: number | null | undefined): string {
  return n === null || n === undefined ? "–" : fmt.format(n);
}
export function fmtMs(n: number | null | undefined): string {
  return n === null || n === undefined ? "–" : `${n < 10 ? n.toFixed(1) : Math.round(n)} ms`;
}
export function fmtDate(iso: string): string {
  return new Date(iso).toLocaleString();
}
export function fmtBytes(n: number): string {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${u[i]}`;
}

/** A text input for a piece of a form's string state, named by `label` (its accessible name). */
export function TextInput({
  label,
  placeholder,
  value,
  readOnly,
  onChange,
}: {
  label: string;
  placeholder?: string;
  value: string;
  readOnly?: boolean;
  onChange: (value: string) => void;
}) {
  return (
    <input
      aria-label={label}
      placeholder={placeholder}
      value={value}
      readOnly={readOnly}
      onChange={(e) => onChange(e.target.value)}
    />
  );
}
