import { createContext, type MouseEvent, type ReactNode, useContext, useEffect, useState } from "react";

// A small history router for the console under /console (the server answers every route with index.html).

export const BASE = "/console";

function current(): string {
  const p = window.location.pathname;
  const rel = p.startsWith(BASE) ? p.slice(BASE.length) : p;
  return rel === "" ? "/" : rel;
}

const RouteContext = createContext<{ path: string; navigate: (to: string) => void }>({
  path: "/",
  navigate: () => undefined,
});

export function RouterProvider({ children }: { children: ReactNode }) {
  const [path, setPath] = useState(current);
  useEffect(() => {
    const onPop = () => setPath(current());
    window.addEventListener("popstate", onPop);
    return () => window.removeEventListener("popstate", onPop);
  }, []);
  const navigate = (to: string) => {
    window.history.pushState(null, "", BASE + to);
    setPath(current());
    window.scrollTo(0, 0);
  };
  return <RouteContext.Provider value={{ path, navigate }}>{children}</RouteContext.Provider>;
}

export function useRoute() {
  return useContext(RouteContext);
}

/** Matches `pattern` ("/apps/:id") against `path`; returns the params or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const a = pattern.split("/").filter(Boolean);
  const b = path.split("/").filter(Boolean);
  if (a.length !== b.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < a.length; i++) {
    if (a[i]!.startsWith(":")) params[a[i]!.slice(1)] = decodeURIComponent(b[i]!);
    else if (a[i] !== b[i]) return null;
  }
  return params;
}

export function Link({ to, children, className }: { to: string; children: ReactNode; className?: string }) {
  const { navigate, path } = useRoute();
  const onClick = (e: MouseEvent) => {
    if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
    e.preventDefault();
    navigate(to);
  };
  const active = to === "/" ? path === "/" : path.startsWith(to);
  return (
    <a
      href={BASE + to}
      onClick={onClick}
      className={[className, active ? "active" : ""].filter(Boolean).join(" ") || undefined}
    >
      {children}
    </a>
  );
}
