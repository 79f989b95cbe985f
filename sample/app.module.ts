import { Logger, Module, type OnApplicationShutdown } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';

import { AppController } from './app.controller';
import { sampleDatabaseOptions } from './database';

/**
 * The sample app: TypeORM on DATABASE_URL with the gen-durable migration run at boot.
 * Add the engine module and the sample FSMs to `imports` / `providers` here.
 */
@Module({
  imports: [TypeOrmModule.forRootAsync({ useFactory: () => sampleDatabaseOptions() })],
  controllers: [AppController],
})
export class AppModule implements OnApplicationShutdown {
  private readonly logger = new Logger('Sample');

  onApplicationShutdown(signal?: string): void {
    this.logger.log(`shut down${signal ? ` on ${signal}` : ''}`);
  }
}
