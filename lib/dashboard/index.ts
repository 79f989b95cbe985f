// gen-durable/dashboard: the operations dashboard (docs/dashboard.md, docs/design.md §30). A
// separate entry point, so apps that do not mount it never load it.
export { GenDurableDashboardModule } from './dashboard.module';
export type { DashboardAccess, DashboardOptions, DashboardRequest } from './dashboard-options';
export { CONTENT_SECURITY_POLICY } from './http-exchange';
export { CSRF_COOKIE, CSRF_FIELD, CSRF_HEADER } from './csrf';
