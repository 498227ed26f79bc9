export { type Authorize, type UpgradeInfo, WsGateway, WsLimitError } from "./gateway";
export { NOOP_WS_HOOKS, type WsHooks } from "./hooks";
export { type SessionInit, WsClose, WsSession } from "./session";
