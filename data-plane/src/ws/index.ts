export { type Authorize, type UpgradeInfo, WsGateway, WsLimitError } from "./gateway";
export { type SessionInit, WsClose, WsSession } from "./session";
