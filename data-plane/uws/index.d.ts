export * from "@btc-vision/uwebsockets.js";
