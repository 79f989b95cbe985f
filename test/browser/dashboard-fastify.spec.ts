import { describeDashboard } from './support/dashboard-suite';

describeDashboard('fastify');
