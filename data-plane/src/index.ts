export { type DataPlaneConfig, loadDataPlaneConfig } from "./config";
export { type DataPlane, type DataPlaneOverrides, startDataPlane } from "./data-plane";
