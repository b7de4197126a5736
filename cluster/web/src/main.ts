/**
 * The cluster dashboard's page (served by `npx cluster dashboard`): Preact for the views, uPlot for the charts,
 * bundled by scripts/build-web.mjs into cluster/web/dist.
 */
import { h, render } from 'preact';
import { App } from './app.js';
import './style.css';

render(h(App, {}), document.getElementById('app')!);
