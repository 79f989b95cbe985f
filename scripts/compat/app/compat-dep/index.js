'use strict';
// A library written in CommonJS: `require('gen-durable')` loads the package's CommonJS build even
// when the app that uses this library imports the ES-module build.
const { Inject, Injectable } = require('@nestjs/common');
const genDurable = require('gen-durable');

class EngineProbe {
  constructor(byToken, byClass) {
    this.byToken = byToken;
    this.byClass = byClass;
  }
}
Inject(genDurable.getEngineToken())(EngineProbe, undefined, 0);
Inject(genDurable.EngineService)(EngineProbe, undefined, 1);
Injectable()(EngineProbe);

module.exports = { EngineProbe, genDurable };
